import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { loadMigrations } from '../../src/migrate/sql-files.js';
import { runCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { describeSchema } from '../schema/describe-schema.js';
import { copySql, editSql } from './sql-copy.js';

// A released migration is never edited: `migrate` records each applied file's
// checksum, and `migrate` and `run` refuse a database whose applied migration
// differs from the file of the same name, before anything changes.

const db = useTestDatabase({ empty: true });
const temp = useTempDirectories();
const baseline = loadMigrations()[0]!;

/** What migrate may change: the schema, the bookkeeping rows and the functions' digests. */
const state = async (): Promise<string> =>
  [
    await describeSchema(db.pool),
    JSON.stringify((await db.pool.query('select * from asset_webhooks.migrations order by id')).rows),
    JSON.stringify((await db.pool.query('select path, digest from asset_webhooks.routine_files order by path')).rows),
  ].join('\n');

describe('migration checksums', () => {
  it('records the sha256 of each applied file', async () => {
    await migrate(db.pool, { binding: 'reference' });
    const { rows } = await db.pool.query('select name, checksum from asset_webhooks.migrations order by id');
    expect(rows).toEqual(loadMigrations().map(({ name, checksum }) => ({ name, checksum })));
    expect(rows[0]).toEqual({ name: '0001_baseline', checksum: baseline.checksum });
    expect(baseline.checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it('migrate refuses a database whose applied migration differs from its file, naming the file, and changes nothing', async () => {
    const sql = copySql(temp('aw-checksums-'));
    // An edit a reviewer could miss: a column's default, and a changed function that must not be applied either.
    editSql(sql, 'migrations/0001_baseline.sql', '-- The schema asset_webhooks:', '-- The schema  asset_webhooks:');
    editSql(sql, 'functions/now.sql', 'return clock_timestamp();', "return clock_timestamp() + interval '1 day';");
    const before = await state();
    const edited = loadMigrations(sql)[0]!;

    const refusal = migrate(db.pool, { sqlDirectory: sql });
    await expect(refusal).rejects.toMatchObject({ code: 'migration_changed' });
    const message = await refusal.catch((error: Error) => error.message);
    expect(message).toContain(path.join(sql, 'migrations', '0001_baseline.sql'));
    expect(message).toContain(
      `its checksum is ${edited.checksum.slice(0, 12)}, the one recorded when it was applied is ${baseline.checksum.slice(0, 12)}`,
    );
    expect(message).toContain('a released migration is never edited');
    expect(await state()).toBe(before);
  });

  it('run and migrate refuse, in one line naming the file, a database migrated from another text of a migration', async () => {
    // The database's record says the baseline applied was another text than this code's file.
    await db.pool.query("update asset_webhooks.migrations set checksum = repeat('a', 64) where id = 1");
    const config = path.join(temp('aw-checksums-config-'), 'webhooks.yaml');
    writeFileSync(config, receiverConfig([{ id: 'crm', url: 'http://127.0.0.1:9/hook' }]));
    try {
      const before = await state();
      const expected =
        `${baseline.file} is not the migration 0001_baseline applied to this database: ` +
        `its checksum is ${baseline.checksum.slice(0, 12)}, the one recorded when it was applied is aaaaaaaaaaaa.`;
      for (const command of [['run', '--config', config], ['migrate']]) {
        const result = await runCli([...command, '--database-url', db.url]);
        expect({ command, code: result.code }).toEqual({ command, code: 1 });
        expect(result.stderr).toContain(expected);
        expect(result.stderr.trim().split('\n')).toHaveLength(1);
      }
      expect(await state()).toBe(before);
    } finally {
      await db.pool.query('update asset_webhooks.migrations set checksum = $1 where id = 1', [baseline.checksum]);
    }
  }, 120_000);

  it('refuses a database migrated by a pre-release build, which recorded no checksums, saying how to start afresh', async () => {
    await db.pool.query('alter table asset_webhooks.migrations drop column checksum');
    const before = await state();
    const refusal = await migrate(db.pool).catch((error: Error) => error);
    expect(refusal).toBeInstanceOf(Error);
    expect((refusal as Error).message).toMatch(
      /^schema asset_webhooks was migrated by a pre-release build of asset-webhooks \(asset_webhooks.migrations records no checksum of 0001_baseline\), .*drop schema asset_webhooks cascade/,
    );
    expect(await state()).toBe(before);
  });
});
