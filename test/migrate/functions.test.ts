import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { codeSchemaVersion, loadMigrations, loadRoutineFiles, routineDigest } from '../../src/migrate/sql-files.js';
import { runCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { describeSchema } from '../schema/describe-schema.js';
import { copySql, editSql } from './sql-copy.js';

// The functions of sql/functions and the objects of sql/dependents are applied
// by every migrate, and `run` refuses a database whose functions were applied
// from other files than its own.

const db = useTestDatabase({ empty: true });
const temp = useTempDirectories();
const codeDigest = routineDigest(loadRoutineFiles());

const oidOf = async (name: string): Promise<number> =>
  (
    await db.pool.query<{ oid: number }>(
      "select p.oid from pg_proc p where p.pronamespace = 'asset_webhooks'::regnamespace and p.proname = $1",
      [name],
    )
  ).rows[0]!.oid;

/** An eventId of this installation: it must survive every migrate (its key is the installation's). */
const anEventId = async (): Promise<string> =>
  (await db.pool.query<{ id: string }>("select asset_webhooks.event_id_of(42, '2026-11-27T10:00:00Z')::text as id"))
    .rows[0]!.id;

describe('migrate applies the function files on every run', () => {
  it('leaves the schema, the functions and the eventIds as they were when run a second time', async () => {
    const first = await migrate(db.pool, { binding: 'reference' });
    expect(first).toMatchObject({ applied: loadMigrations().map((m) => m.name), functionsDigest: codeDigest });
    const schema = await describeSchema(db.pool);
    const oid = await oidOf('claim_payloads');
    const eventId = await anEventId();

    const second = await migrate(db.pool);
    expect(second).toMatchObject({ applied: [], functionsDigest: codeDigest });
    expect(await describeSchema(db.pool)).toBe(schema);
    // Replaced in place: the oid that views, defaults and prepared plans refer to is kept.
    expect(await oidOf('claim_payloads')).toBe(oid);
    expect(await anEventId()).toBe(eventId);
  });

  it('installs the text of a changed function file at the next migrate', async () => {
    const sql = copySql(temp('aw-migrate-functions-'));
    // Seconds asset_webhooks.now() is ahead of the database's clock, with no offset set.
    const read = async (): Promise<number> =>
      (
        await db.pool.query<{ ahead: number }>(
          'select round(extract(epoch from asset_webhooks.now() - clock_timestamp()))::int as ahead',
        )
      ).rows[0]!.ahead;
    expect(await read()).toBe(0);
    const oid = await oidOf('now');

    editSql(sql, 'functions/now.sql', 'return clock_timestamp();', "return clock_timestamp() + interval '1 day';");
    const result = await migrate(db.pool, { sqlDirectory: sql });

    expect(await read()).toBe(86_400);
    expect(await oidOf('now')).toBe(oid);
    expect(result.functionsDigest).not.toBe(codeDigest);
  });

  it('run and the other commands refuse a database whose functions differ from their files, in one line naming both digests', async () => {
    // The previous test left the functions of a changed copy.
    const { rows } = await db.pool.query<{ path: string; digest: string }>(
      'select path, digest from asset_webhooks.routine_files',
    );
    const databaseDigest = routineDigest(rows);
    expect(databaseDigest).not.toBe(codeDigest);
    const config = path.join(temp('aw-migrate-config-'), 'webhooks.yaml');
    writeFileSync(config, receiverConfig([{ id: 'crm', url: 'http://127.0.0.1:9/hook' }]));

    for (const command of [['run', '--config', config], ['dead-letters']]) {
      const result = await runCli([...command, '--database-url', db.url]);
      expect({ command, code: result.code, stderr: result.stderr }).toEqual({
        command,
        code: 1,
        stderr:
          `schema asset_webhooks has the functions of digest ${databaseDigest}, not this code's digest ${codeDigest}: ` +
          'run `asset-webhooks migrate` with this release first, unless a newer release migrated it: then run that release\n',
      });
    }

    const migrated = await runCli(['migrate', '--database-url', db.url]);
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toBe(
      `schema asset_webhooks at version ${codeSchemaVersion()} (already up to date), functions ${codeDigest}\n`,
    );
    expect(await runCli(['dead-letters', '--database-url', db.url])).toMatchObject({ code: 0, stderr: '' });
    // Four processes of the CLI, each several seconds to start on a loaded machine.
  }, 180_000);
});
