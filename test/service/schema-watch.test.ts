import { expect, it } from 'vitest';
import { SCHEMA_CHANGED_CHANNEL } from '../../src/db/payloads-ready.js';
import { codeSchemaVersion, loadRoutineFiles, routineDigest } from '../../src/migrate/sql-files.js';
import { watchSchema, type SchemaFound } from '../../src/service/schema-watch.js';
import { eventually } from '../helpers/receiver.js';
import { silentLogger } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

/** A watch whose own reads come only every minute: what it sees sooner, a notification or check() showed it. */
function watch(): { found: SchemaFound[]; stop(): Promise<void>; check(): void } {
  const found: SchemaFound[] = [];
  const watching = watchSchema({
    pool: db.pool,
    databaseUrl: db.url,
    logger: silentLogger,
    intervalMs: 60_000,
    onMoved: (move) => found.push(move),
  });
  return { found, stop: () => watching.stop(), check: () => watching.check() };
}

it("sees functions that are not its code's at migrate's notification, and says so once", async () => {
  const watching = watch();
  const { rows } = await db.pool.query<{ path: string; digest: string }>(
    'select path, digest from asset_webhooks.routine_files',
  );
  try {
    // Nothing moved: the read at listening finds the schema current.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(watching.found).toEqual([]);
    await db.pool.query(
      "update asset_webhooks.routine_files set digest = 'changed' where path = 'functions/claim_payloads.sql'",
    );
    await db.pool.query("select pg_notify($1, '')", [SCHEMA_CHANGED_CHANNEL]);
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
    watching.check();
    await db.pool.query("select pg_notify($1, '')", [SCHEMA_CHANGED_CHANNEL]);
    await new Promise((resolve) => setTimeout(resolve, 300));
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

it('sees a newer migration when asked (a claim failed), without a notification', async () => {
  const watching = watch();
  try {
    await db.pool.query(
      "insert into asset_webhooks.migrations (id, name, checksum) values (999, '0999_next_release', 'c')",
    );
    watching.check();
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
