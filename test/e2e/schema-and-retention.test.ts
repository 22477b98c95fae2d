import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { expireWaiting } from '../../src/delivery/recover.js';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { codeSchemaVersion, loadMigrations } from '../../src/migrate/sql-files.js';
import { runCli } from '../helpers/cli.js';
import { testDelivery } from '../helpers/delivery.js';
import { openWebhook, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const codeVersion = codeSchemaVersion();
const codeVersionName = loadMigrations().at(-1)!.name;

const tempDirectory = useTempDirectories();

const db = useTestDatabase();
const configFile = path.join(tempDirectory('aw-schema-'), 'config.yaml');

beforeAll(async () => {
  await resetData(db.pool);
  writeFileSync(configFile, 'assetUpdater:\n  webhooks: []\n');
});

describe('schema versions', () => {
  it('refuses a database whose schema is newer than the code, naming both versions', async () => {
    await db.pool.query(
      "insert into asset_webhooks.migrations (id, name, checksum) values (999, '0999_from_the_future', 'f')",
    );
    try {
      const run = await runCli(['run', '--config', configFile, '--database-url', db.url]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        `schema asset_webhooks is at version 999, newer than this code's version ${codeVersion}`,
      );
      const migrate = await runCli(['migrate', '--database-url', db.url]);
      expect(migrate.code).toBe(1);
      expect(migrate.stderr).toContain(`version 999, newer than this code's version ${codeVersion}`);
    } finally {
      await db.pool.query('delete from asset_webhooks.migrations where id = 999');
    }
  });

  it('refuses a schema left by the pre-release migrations, in one line naming both versions and how to start afresh', async () => {
    const preRelease = [
      '0001_outbox',
      '0002_delivery_chain',
      '0003_payload_compression',
      '0004_event_id_from_seq',
      '0005_outbox_without_edit_index',
      '0006_settle_batches',
      '0007_set_based_settle',
      '0008_settle_by_ids',
      '0009_queue_head_index',
      '0010_history_bounded_housekeeping',
      '0011_process_lease',
      '0012_dispatch_recheck',
      '0013_event_ids_out_of_line',
      '0014_dispatch_plans',
      '0015_event_type_domain',
      '0016_process_of_session_without_regex',
    ];
    const { rows: before } = await db.pool.query<{ id: number; name: string; checksum: string }>(
      'select id, name, checksum from asset_webhooks.migrations order by id',
    );
    // As the pre-release migrations left it: no checksums.
    await db.pool.query('alter table asset_webhooks.migrations drop column checksum');
    await db.pool.query('delete from asset_webhooks.migrations');
    await db.pool.query(
      'insert into asset_webhooks.migrations (id, name) select i, n from unnest($1::text[]) with ordinality as m(n, i)',
      [preRelease],
    );
    try {
      const expected = `schema asset_webhooks is at pre-release version 0016_process_of_session_without_regex, which this code's schema version ${codeVersionName} does not upgrade`;
      const migrate = await runCli(['migrate', '--database-url', db.url]);
      expect(migrate.code).toBe(1);
      expect(migrate.stderr).toContain(expected);
      expect(migrate.stderr).toContain('drop schema asset_webhooks cascade');
      expect(migrate.stderr.trim().split('\n')).toHaveLength(1);
      // Nothing was applied: the bookkeeping is as it was.
      const { rows: after } = await db.pool.query<{ name: string }>(
        'select name from asset_webhooks.migrations order by id',
      );
      expect(after.map((row) => row.name)).toEqual(preRelease);
      const run = await runCli(['run', '--config', configFile, '--database-url', db.url]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(expected);
    } finally {
      await db.pool.query('delete from asset_webhooks.migrations');
      await db.pool.query('alter table asset_webhooks.migrations add column checksum text not null');
      await db.pool.query(
        'insert into asset_webhooks.migrations (id, name, checksum) select * from unnest($1::int[], $2::text[], $3::text[])',
        [before.map((row) => row.id), before.map((row) => row.name), before.map((row) => row.checksum)],
      );
    }
  });
});

describe('retention and expiry', () => {
  it('removes consumed events and finished payloads older than retentionDays, keeps the rest', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) values (10), (11)');
    await runCoalesce(db.pool, [crm]);
    await db.pool.query(
      "update asset_webhooks.payloads set status = 'delivered', created_at = now() - interval '21 days', delivered_at = now() - interval '20 days'",
    );
    await db.pool.query(
      "update asset_webhooks.events set coalesced_at = now() - interval '20 days' where asset_id = 10",
    );
    const result = await runMaintenance({
      pool: db.pool,
      retentionDays: 14,
      logger: pino({ level: 'silent' }),
      batchSize: 1,
    });
    expect(result.deleted).toMatchObject({ events: 1, payloads: 1 });
    const { rows } = await db.pool.query('select asset_id from asset_webhooks.events where asset_id in (10, 11)');
    expect(rows).toEqual([{ asset_id: 11 }]);
  });

  it('dead-letters a payload that waited past deadLetterAfterSeconds (a disabled webhook) as expired', async () => {
    await db.pool.query(
      "insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, series_started_at) values ('gone', 'pending', '{}', 2, 0, '{}', now() - interval '2 days')",
    );
    const delivery = await testDelivery(db.pool, 'assetUpdater:\n  webhooks: []\n');
    try {
      expect(await expireWaiting(delivery.context)).toBe(1);
    } finally {
      await delivery.close();
    }
    const { rows } = await db.pool.query("select reason from asset_webhooks.dead_letters where webhook_id = 'gone'");
    expect(rows).toEqual([{ reason: 'expired' }]);
  });
});
