import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The lifecycle module is the one writer of a payload's delivery state
 * (docs/payload-lifecycle.md): the tables below are inserted into, updated
 * and deleted from only by the TypeScript files of src/lifecycle/ and the SQL
 * functions named here (sql/functions/README.md lists the same set).
 * Migrations are left out: each moves live data once, under migrate's lock,
 * and is reviewed as the schema change it is.
 */
const TABLES = ['payloads', 'in_flight', 'attempt_log', 'attempts', 'redeliveries'];

const LIFECYCLE_SQL = [
  'sql/functions/payload_state.sql',
  'sql/functions/transition_refusal.sql',
  'sql/functions/payload_transitions.sql',
  'sql/functions/transition_payloads.sql',
  'sql/functions/claim_payloads.sql',
  'sql/functions/start_attempts.sql',
  'sql/functions/complete_attempts.sql',
  'sql/functions/redeliver_payloads.sql',
  'sql/functions/replay_payloads.sql',
  'sql/functions/dead_letter_removed.sql',
  'sql/functions/resume_webhooks.sql',
  'sql/functions/resume_gone_webhook.sql',
];
const LIFECYCLE_TS = 'src/lifecycle/';

const root = join(__dirname, '..', '..');

function filesUnder(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.(ts|sql)$/.test(entry.name))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/**
 * The statements of `text` that write one of TABLES: `insert into`,
 * `update`, `delete from`, `merge into`, `truncate`, `copy ... from`, with or
 * without the schema, and the table named in a string being put together
 * (`asset_webhooks.${table}`).
 */
function writesOf(text: string): string[] {
  const table = `(?:asset_webhooks\\.)?(?:${TABLES.join('|')})\\b`;
  const write = new RegExp(
    `\\b(?:insert\\s+into|update(?:\\s+only)?|delete\\s+from(?:\\s+only)?|merge\\s+into|truncate(?:\\s+table)?|copy)\\s+"?${table}`,
    'gi',
  );
  const found = [...text.matchAll(write)].map((match) => match[0].replace(/\s+/g, ' '));
  // A statement whose table is put together: the scan cannot tell which one it writes.
  const built = /\b(?:insert\s+into|update|delete\s+from)\s+asset_webhooks\.\$\{/gi;
  return [...found, ...[...text.matchAll(built)].map((match) => match[0])];
}

function outsideTheModule(): Array<{ file: string; writes: string[] }> {
  const files = [...filesUnder('src'), ...filesUnder('sql').filter((file) => !file.startsWith('sql/migrations/'))];
  return files
    .filter((file) => !file.startsWith(LIFECYCLE_TS) && !LIFECYCLE_SQL.includes(file))
    .map((file) => ({ file, writes: writesOf(readFileSync(join(root, file), 'utf8')) }))
    .filter((found) => found.writes.length > 0);
}

describe('the one writer of a payload delivery state', () => {
  it('is the lifecycle module: no other file of src/ or sql/ writes payloads, attempts or redeliveries', () => {
    expect(outsideTheModule()).toEqual([]);
  });

  it('names only files that exist', () => {
    const sql = filesUnder('sql/functions');
    expect(LIFECYCLE_SQL.filter((file) => !sql.includes(file))).toEqual([]);
  });

  it.each([
    ['insert into asset_webhooks.payloads (payload_id) values (1)', 1],
    ['UPDATE  asset_webhooks.attempts a set sent = true', 1],
    ['delete from asset_webhooks.redeliveries where true', 1],
    ['update payloads set status = 1', 1],
    ['delete from asset_webhooks.${table} where', 1],
    ['truncate asset_webhooks.payloads', 1],
    ['select * from asset_webhooks.payloads for update', 0],
    ['update asset_webhooks.webhooks set paused_since = null', 0],
    ['insert into asset_webhooks.payload_notes values (1)', 0],
  ])('finds the writes of %s', (text, count) => {
    expect(writesOf(text)).toHaveLength(count);
  });
});
