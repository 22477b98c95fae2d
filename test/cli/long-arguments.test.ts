import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/test-database.js';

// An argument of 120 KB (a file pasted where an id was expected) is quoted
// in the error as its first 40 characters, escaped, and `...`: never whole.

const db = useTestDatabase();
const HUGE = `${'x'.repeat(120 * 1024 - 1)}\u001b`;
const PREFIX = `"${'x'.repeat(40)}"...`;

describe('a 120 KB argument is quoted as a 40-character prefix', () => {
  it.each([
    ['trace EVENT_ID', () => ['trace', HUGE, '--database-url', db.url], 2],
    ['dead-letters --webhook', () => ['dead-letters', '--webhook', HUGE, '--database-url', db.url], 1],
    [
      'events --webhook',
      () => ['events', '--from', '2026-01-01', '--to', '2026-01-02', '--webhook', HUGE, '--database-url', db.url],
      1,
    ],
    ['events --from', () => ['events', '--from', HUGE, '--to', '2026-01-02', '--database-url', db.url], 2],
    ['events --asset', () => ['events', '--from', '2026-01-01', '--to', '2026-01-02', '--asset', HUGE], 2],
    ['backfill --asset', () => ['backfill', '--webhook', 'crm', '--asset', HUGE], 2],
    ['explain --event-type', () => ['explain', '--webhook', 'crm', '--asset', '1', '--event-type', HUGE], 2],
    ['run --http-host', () => ['run', '--http-port', '1', '--http-host', HUGE], 2],
    ['dead-letters redeliver --reason', () => ['dead-letters', 'redeliver', '--webhook', 'crm', '--reason', HUGE], 2],
  ] as const)('%s', async (_, args, code) => {
    const result = await runCli(args());
    expect(result.code).toBe(code);
    expect(result.stderr).toContain(PREFIX);
    expect(result.stderr.length).toBeLessThan(1000);
  });
});
