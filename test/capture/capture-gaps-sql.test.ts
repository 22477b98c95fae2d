import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { captureGaps } from '../../src/migrate/binding-check.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * docs/operations.md, "Capture errors and gaps", gives the SQL that clears a
 * capture gap. A plain ENABLE TRIGGER does not (the triggers then fire on
 * origin only, and session_replication_role = replica skips them): these
 * tests run the guide's own statements, read from the page.
 */

const db = useTestDatabase();
const TABLES = ['public.assets', 'public.asset_keywords', 'public.asset_additional_fields'];

/** The ```sql blocks of the section of docs/operations.md that begins with `heading`. */
function sqlBlocks(heading: string): string[] {
  const page = readFileSync(fileURLToPath(new URL('../../docs/operations.md', import.meta.url)), 'utf8');
  const start = page.indexOf(`\n## ${heading}\n`);
  expect(start, `docs/operations.md: expected a section "## ${heading}"`).toBeGreaterThan(-1);
  const end = page.indexOf('\n## ', start + 1);
  const section = page.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/^( *)```sql\n([\s\S]*?)^\1```$/gm)].map(([, indent, body]) =>
    body!
      .split('\n')
      .map((line) => line.slice(indent!.length))
      .join('\n'),
  );
}

/** The trigger states a table's capture triggers have: pg_trigger.tgenabled, A always, O origin only, D disabled. */
async function states(): Promise<string[]> {
  const { rows } = await db.pool.query<{ tgenabled: string }>(
    `select distinct tgenabled from pg_catalog.pg_trigger where tgname like 'asset\\_webhooks\\_capture\\_%' order by 1`,
  );
  return rows.map((row) => row.tgenabled);
}

describe('docs/operations.md: the SQL that clears a capture gap', () => {
  let single: string;
  let every: string;
  beforeAll(() => {
    const blocks = sqlBlocks('Capture errors and gaps');
    expect(blocks).toHaveLength(2);
    [single, every] = blocks as [string, string];
  });

  it('a gap left by a plain ENABLE TRIGGER (as after pg_restore --disable-triggers) is cleared by the statement for every capture trigger', async () => {
    expect(await captureGaps(db.pool)).toEqual([]);
    for (const table of TABLES) await db.pool.query(`alter table ${table} disable trigger all`);
    expect(await captureGaps(db.pool)).toHaveLength(TABLES.length);
    for (const table of TABLES) await db.pool.query(`alter table ${table} enable trigger all`);
    // Enabled, but on origin only: still a gap per table.
    expect(await states()).toEqual(['O']);
    const gaps = await captureGaps(db.pool);
    expect(gaps).toHaveLength(TABLES.length);
    for (const gap of gaps) expect(gap).toContain('got on origin only');

    await db.pool.query(every);
    expect(await states()).toEqual(['A']);
    expect(await captureGaps(db.pool)).toEqual([]);
    // And it is what the gaps were about: a bulk load's changes are captured again.
    const client = await db.pool.connect();
    try {
      await client.query("set session_replication_role = 'replica'");
      await client.query('insert into assets (asset_id) values (910001)');
    } finally {
      await client.query('reset session_replication_role');
      client.release();
    }
    const { rows } = await db.pool.query<{ n: number }>(
      'select count(*)::int as n from asset_webhooks.outbox where asset_id = 910001',
    );
    expect(rows).toEqual([{ n: 1 }]);
  });

  it('the statement for one trigger clears the gap of the trigger it names', async () => {
    const named = /ALTER TABLE (\S+) ENABLE ALWAYS TRIGGER (\w+);/.exec(single);
    expect(named, single).not.toBeNull();
    const [, table, trigger] = named as unknown as [string, string, string];
    await db.pool.query(`alter table ${table} disable trigger ${trigger}`);
    expect(await captureGaps(db.pool)).toEqual([
      expect.stringContaining(`capture triggers ${trigger}: expected enabled`),
    ]);
    await db.pool.query(single);
    expect(await captureGaps(db.pool)).toEqual([]);
  });
});
