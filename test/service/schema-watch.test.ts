import { expect, it } from 'vitest';
import { codeSchemaVersion, loadRoutineFiles, routineDigest } from '../../src/migrate/sql-files.js';
import { watchSchema, type SchemaFound } from '../../src/service/schema-watch.js';
import { eventually } from '../helpers/receiver.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

/** A watch that reads every `intervalMs`, and when checked. */
function watch(intervalMs = 60_000): { found: SchemaFound[]; stop(): Promise<void>; check(): Promise<void> } {
  const found: SchemaFound[] = [];
  const watching = watchSchema({
    pool: db.pool,
    intervalMs,
    onMoved: (move) => found.push(move),
  });
  return { found, stop: () => watching.stop(), check: () => watching.check() };
}

it("sees functions that are not its code's when asked (migrate notified, a claim failed), and says so once", async () => {
  const watching = watch();
  const { rows } = await db.pool.query<{ path: string; digest: string }>(
    'select path, digest from asset_webhooks.routine_files',
  );
  try {
    // Nothing moved: a read finds the schema current.
    await watching.check();
    expect(watching.found).toEqual([]);
    await db.pool.query(
      "update asset_webhooks.routine_files set digest = 'changed' where path = 'functions/claim_payloads.sql'",
    );
    await watching.check();
    await eventually(async () => (watching.found.length > 0 ? true : undefined), {
      timeoutMs: 5000,
      what: 'the move seen',
    });
    const changed = routineDigest(
      rows.map((row) => (row.path === 'functions/claim_payloads.sql' ? { ...row, digest: 'changed' } : row)),
    );
    expect(watching.found).toEqual([
      {
        databaseVersion: codeSchemaVersion(),
        databaseFunctions: changed,
        codeVersion: codeSchemaVersion(),
        codeFunctions: routineDigest(loadRoutineFiles()),
      },
    ]);
    await watching.check();
    expect(watching.found).toHaveLength(1);
  } finally {
    await watching.stop();
    for (const row of rows)
      await db.pool.query('update asset_webhooks.routine_files set digest = $2 where path = $1', [
        row.path,
        row.digest,
      ]);
  }
});

it('sees a newer migration at its own reads, unasked', async () => {
  const watching = watch(200);
  try {
    await db.pool.query(
      "insert into asset_webhooks.migrations (id, name, checksum) values (999, '0999_next_release', 'c')",
    );
    await eventually(async () => (watching.found.length > 0 ? true : undefined), {
      timeoutMs: 5000,
      what: 'the move seen',
    });
    expect(watching.found[0]).toMatchObject({ databaseVersion: 999, codeVersion: codeSchemaVersion() });
  } finally {
    await watching.stop();
    await db.pool.query('delete from asset_webhooks.migrations where id = 999');
  }
});
