import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { runCli } from '../helpers/cli.js';
import { openWebhook, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const configFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'aw-explain-')), 'config.yaml');

beforeAll(async () => {
  await resetData(db.pool);
  writeFileSync(configFile, `assetUpdater:
  webhooks:
    - id: shop
      url: https://shop.example/hook
      enabled: true
      filters:
        - { filterKind: keywords, condition: ANY, value: [summer] }
        - { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026"] }
`);
  await db.pool.query("insert into assets (asset_id, state) values (1, 'approved'), (2, null)");
  await db.pool.query("insert into asset_keywords values (1, 'summer'), (2, 'winter')");
  await db.pool.query("insert into asset_additional_fields values (1, 'campaign', '2026')");
});

describe('explain', () => {
  it('says which check passes or excludes, with the values compared', async () => {
    const passing = await runCli(['explain', '--webhook', 'shop', '--asset', '1', '--config', configFile, '--database-url', db.url]);
    expect(passing.code).toBe(0);
    expect(passing.stdout).toMatch(/pass\s+filter:1\s+keywords ANY \[summer\]: the asset has \[summer\], matching \[summer\]/);
    expect(passing.stdout).toContain('=> delivered');
    const excluded = await runCli(['explain', '--webhook', 'shop', '--asset', '2', '--event-type', 'created', '--json', '--config', configFile, '--database-url', db.url]);
    expect(JSON.parse(excluded.stdout)).toMatchObject({ delivered: false, excludedBy: 'filter:1', eventType: 'CREATED' });
  });

  it('refuses an unknown webhook or asset (exit 1) and an unknown event type (exit 2)', async () => {
    const webhook = await runCli(['explain', '--webhook', 'nope', '--asset', '1', '--config', configFile, '--database-url', db.url]);
    expect(webhook.code).toBe(1);
    expect(webhook.stderr).toContain('--webhook: expected one of shop, got "nope"');
    const asset = await runCli(['explain', '--webhook', 'shop', '--asset', '999', '--config', configFile, '--database-url', db.url]);
    expect(asset.code).toBe(1);
    expect(asset.stderr).toContain('--asset: expected an existing asset id, got 999');
    const type = await runCli(['explain', '--webhook', 'shop', '--asset', '1', '--event-type', 'Renamed', '--config', configFile, '--database-url', db.url]);
    expect(type.code).toBe(2);
  });
});

describe('schema versions', () => {
  it('refuses a database whose schema is newer than the code, naming both versions', async () => {
    await db.pool.query("insert into asset_webhooks.migrations (id, name) values (999, '0999_from_the_future')");
    try {
      const run = await runCli(['run', '--config', configFile, '--database-url', db.url]);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/schema asset_webhooks is at version 999, newer than this code's version 1/);
      const migrate = await runCli(['migrate', '--database-url', db.url]);
      expect(migrate.code).toBe(1);
      expect(migrate.stderr).toMatch(/version 999, newer than this code's version 1/);
    } finally {
      await db.pool.query('delete from asset_webhooks.migrations where id = 999');
    }
  });
});

describe('retention', () => {
  it('removes consumed events and finished payloads older than retentionDays, keeps the rest', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query("insert into assets (asset_id) values (10), (11)");
    await runCoalesce(db.pool, [crm]);
    await db.pool.query("update asset_webhooks.payloads set status = 'delivered', delivered_at = now() - interval '20 days'");
    await db.pool.query("update asset_webhooks.events set coalesced_at = now() - interval '20 days' where asset_id = 10");
    const result = await runMaintenance({ pool: db.pool, retentionDays: 14, deadLetterAfterSeconds: 86_400, logger: pino({ level: 'silent' }), batchSize: 1 });
    expect(result.deleted).toMatchObject({ events: 1, payloads: 1 });
    const { rows } = await db.pool.query('select asset_id from asset_webhooks.events where asset_id in (10, 11)');
    expect(rows).toEqual([{ asset_id: 11 }]);
  });

  it('dead-letters a payload that waited past deadLetterAfterSeconds (a disabled webhook) as expired', async () => {
    await db.pool.query("insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, series_started_at) values ('gone', 'pending', '{}', 2, 0, '{}', now() - interval '2 days')");
    const result = await runMaintenance({ pool: db.pool, retentionDays: 14, deadLetterAfterSeconds: 86_400, logger: pino({ level: 'silent' }) });
    expect(result.expired).toBe(1);
    const { rows } = await db.pool.query("select reason from asset_webhooks.dead_letters where webhook_id = 'gone'");
    expect(rows).toEqual([{ reason: 'expired' }]);
  });
});
