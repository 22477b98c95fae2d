import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startCli, type CliProcess } from '../helpers/cli.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

// Ids of the asset schema are bigints; beyond 2^53 a JavaScript number rounds
// them (9007199254740993 becomes 9007199254740992). Every id below is such a
// value or its rounded neighbour, so that an id read as a number anywhere on
// the way shows up as the wrong digits, or as two assets confused.

const tempDirectory = useTempDirectories();
const db = useTestDatabase();

const A = '9007199254740993'; // top-level, domain A, latest atom ATOM
const B = '9007199254740992'; // top-level, domain B: what A rounds to
const CHILD_OF_A = '9007199254740997';
const CHILD_OF_B = '9007199254740996';
const ATOM = '9007199254740995';

let receivers: Record<'all' | 'domain' | 'parent', TestReceiver>;
let service: CliProcess;
let configFile: string;
let windowFrom: string;

beforeAll(async () => {
  receivers = {
    all: await startTestReceiver('/all'),
    domain: await startTestReceiver('/domain'),
    parent: await startTestReceiver('/parent'),
  };
  configFile = path.join(tempDirectory('aw-exact-ids-'), 'config.yaml');
  writeFileSync(
    configFile,
    stringify({
      assetUpdater: {
        intervalSeconds: 1,
        network: { allowPrivateAddresses: true },
        webhooks: [
          { id: 'all', url: receivers.all.url, enabled: true },
          {
            id: 'domain',
            url: receivers.domain.url,
            enabled: true,
            filters: [{ filterKind: 'domainId', condition: 'ANY', value: [A] }],
          },
          {
            id: 'parent',
            url: receivers.parent.url,
            enabled: true,
            filters: [{ filterKind: 'parentId', condition: 'ANY', value: [A] }],
          },
        ],
      },
    }),
  );
  windowFrom = new Date(Date.now() - 60_000).toISOString();
  service = startCli(['run', '--database-url', db.url, '--config', configFile], { env: { LOG_LEVEL: 'info' } });
  await db.pool.query(
    `insert into assets (asset_id, parent_id, domain_id, latest_atom_id) values (${A}, null, ${A}, ${ATOM}), (${B}, null, ${B}, null)`,
  );
  await db.pool.query(`insert into assets (asset_id, parent_id) values (${CHILD_OF_A}, ${A}), (${CHILD_OF_B}, ${B})`);
  // Two top-level CREATED for `all`, one for `domain`, one child for `parent`.
  // Every event coalesced and every payload settled; which receiver got what is for the tests to say.
  await eventually(
    async () => {
      const {
        rows: [state],
      } = await db.pool.query<{ consumed: number; waiting: number }>(
        `select (select count(*) from asset_webhooks.events)::int as consumed,
              (select count(*) from asset_webhooks.payloads where status in ('open', 'pending'))::int as waiting`,
      );
      return state!.consumed === 4 && state!.waiting === 0 ? true : undefined;
    },
    { timeoutMs: 30_000, what: 'the four CREATED events coalesced and their payloads settled' },
  );
}, 60_000);

afterAll(async () => {
  service?.child.kill('SIGTERM');
  await service?.exited;
  await Promise.all(Object.values(receivers ?? {}).map((receiver) => receiver.close()));
});

function bodies(webhook: keyof typeof receivers): string[] {
  return receivers[webhook].requests.map((request) => request.body);
}

/** The eventId of the CREATED of an asset, from the raw body `all` received. */
function createdEventId(assetId: string): string {
  const match = new RegExp(`"eventId":"([0-9a-f-]{36})","eventTimestamp":"[^"]+","assetId":${assetId},`).exec(
    bodies('all').join('\n'),
  );
  if (!match) throw new Error(`no CREATED of asset ${assetId} in ${bodies('all').join('\n')}`);
  return match[1]!;
}

describe('asset and atom ids beyond 2^53 reach the receiver exactly as stored', () => {
  it('writes assetId and atomId as JSON numbers with the stored digits', () => {
    const all = bodies('all').join('\n');
    expect(all).toContain(`"atomId":${ATOM},`);
    expect(all).toContain(`"assetId":${A},`);
    expect(all).toContain(`"assetId":${B},`);
    expect(all).toMatch(new RegExp(`\\{"atomId":${ATOM},"eventId":"[^"]+","eventTimestamp":"[^"]+","assetId":${A},`));
  });

  it('compares domainId and parentId filters digit for digit', () => {
    const domain = bodies('domain').join('\n');
    expect(domain).toContain(`"assetId":${A},`);
    expect(domain).not.toContain(`"assetId":${B},`);
    const parent = bodies('parent').join('\n');
    expect(parent).toContain(`"assetId":${CHILD_OF_A},`);
    expect(parent).not.toContain(`"assetId":${CHILD_OF_B},`);
  });

  it('records the exact ids in asset_webhooks.events and event_outcomes', async () => {
    const rows = await eventually(
      async () => {
        const { rows: found } = await db.pool.query<{
          asset_id: string;
          atom_id: string | null;
          outcome: string;
          excluded_by: string | null;
        }>(
          `select asset_id::text, atom_id::text, outcome, excluded_by from asset_webhooks.event_outcomes
         where webhook_id = 'domain' order by asset_id`,
        );
        return found.some((row) => row.outcome === 'pending') ? undefined : found;
      },
      { timeoutMs: 20_000, what: 'the delivery to domain to be recorded' },
    );
    expect(rows.map((row) => [row.asset_id, row.atom_id, row.outcome, row.excluded_by])).toEqual([
      [B, null, 'excluded', 'filter:1'],
      [A, ATOM, 'delivered', null],
      [CHILD_OF_B, null, 'excluded', 'parent'],
      [CHILD_OF_A, null, 'excluded', 'parent'],
    ]);
  });
});

describe('the commands print and accept the ids exactly', () => {
  it('trace shows the asset and atom of an event in words and in JSON', async () => {
    const eventId = createdEventId(A);
    const text = await runCli(['trace', eventId, '--database-url', db.url]);
    expect(text.stderr).toBe('');
    expect(text.stdout).toContain(`of asset ${A} `);
    expect(text.stdout).toContain(`atomId ${ATOM}`);
    const json = await runCli(['trace', eventId, '--json', '--database-url', db.url]);
    expect(json.code).toBe(0);
    expect(json.stdout).toContain(`"assetId":${A},`);
    expect(json.stdout).toContain(`"atomId":${ATOM},`);
    expect((JSON.parse(json.stdout) as { eventId: string }).eventId).toBe(eventId);
  });

  it('events --asset selects one asset of two that a number would confuse', async () => {
    const to = new Date(Date.now() + 60_000).toISOString();
    const onlyB = await runCli([
      'events',
      '--from',
      windowFrom,
      '--to',
      to,
      '--asset',
      B,
      '--json',
      '--database-url',
      db.url,
    ]);
    expect(onlyB.code).toBe(0);
    expect(onlyB.stdout).toContain(`"assetId":${B},`);
    expect(onlyB.stdout).not.toContain(A);
    expect(JSON.parse(onlyB.stdout)).toHaveLength(1);
    const onlyA = await runCli(['events', '--from', windowFrom, '--to', to, '--asset', A, '--database-url', db.url]);
    expect(onlyA.code).toBe(0);
    expect(onlyA.stdout).toContain(`CREATED   asset ${A}\n`);
    expect(onlyA.stdout).not.toContain(B);
  });

  it('explain --asset reads the asset and shows its ids exactly', async () => {
    const json = await runCli([
      'explain',
      '--webhook',
      'parent',
      '--asset',
      CHILD_OF_A,
      '--json',
      '--config',
      configFile,
      '--database-url',
      db.url,
    ]);
    expect(json.stderr).toBe('');
    expect(json.stdout).toContain(`"assetId":${CHILD_OF_A},`);
    expect(json.stdout).toContain(`"parentId":${A},`);
    expect(JSON.parse(json.stdout)).toMatchObject({ delivered: true, excludedBy: null });
    const other = await runCli([
      'explain',
      '--webhook',
      'parent',
      '--asset',
      CHILD_OF_B,
      '--config',
      configFile,
      '--database-url',
      db.url,
    ]);
    expect(other.stdout).toContain(`asset ${CHILD_OF_B} (`);
    expect(other.stdout).toContain('=> excluded by filter:1');
    const domain = await runCli([
      'explain',
      '--webhook',
      'domain',
      '--asset',
      A,
      '--json',
      '--config',
      configFile,
      '--database-url',
      db.url,
    ]);
    expect(domain.stdout).toContain(`"domainId":${A},`);
    expect(domain.stdout).toContain(`"latestAtomId":${ATOM},`);
  });

  it.each([
    ['beyond a bigint', '9223372036854775808'],
    ['not decimal digits', '12abc'],
    ['a leading zero', '012'],
  ])('refuses an --asset %s as bad usage', async (_what, value) => {
    const result = await runCli([
      'events',
      '--from',
      windowFrom,
      '--to',
      new Date().toISOString(),
      '--asset',
      value,
      '--database-url',
      db.url,
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `--asset: expected an integer from -9223372036854775808 to 9223372036854775807 in decimal digits, got "${value}"`,
    );
  });
});

describe('a bigint read as a number', () => {
  it('is refused beyond 2^53 rather than rounded', async () => {
    const { rows } = await db.pool.query<{ id: number }>('select 9007199254740991::bigint as id');
    expect(rows[0]!.id).toBe(Number.MAX_SAFE_INTEGER);
    await expect(db.pool.query(`select ${A}::bigint as id`)).rejects.toThrow(`bigint ${A}: expected a value within`);
  });
});
