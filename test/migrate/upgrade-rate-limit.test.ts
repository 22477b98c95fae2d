import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

it('0007 upgrades a live installation: its webhooks stay unlimited until a document gives one a rateLimit', async () => {
  await resetData(db.pool);
  // The installation as migration 0006 left it: two webhooks, one of them failing.
  await undoMigrationsAfter(db.pool, 7);
  await db.pool.query(`drop table asset_webhooks.webhook_queues;
    delete from asset_webhooks.migrations where id >= 7`);
  await db.pool.query(`insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency, failing_since)
    values ('archive', 'http://archive.example/', true, 4, now()),
           ('crm', 'http://crm.example/', true, 1, null)`);

  const result = await migrate(db.pool);
  expect(result.applied).toEqual(migrationsFrom(7));
  // No queue row: no webhook is limited, and the webhooks' rows are as they were.
  const { rows: queues } = await db.pool.query('select * from asset_webhooks.webhook_queues');
  expect(queues).toEqual([]);
  const { rows: webhooks } = await db.pool.query<{ webhook_id: string; concurrency: number; failing: boolean }>(
    `select webhook_id, concurrency, failing_since is not null as failing from asset_webhooks.webhooks order by webhook_id`,
  );
  expect(webhooks).toEqual([
    { webhook_id: 'archive', concurrency: 4, failing: true },
    { webhook_id: 'crm', concurrency: 1, failing: false },
  ]);
  // A document that gives crm a rate records it, with a full bucket; archive stays without a row.
  await db.pool.query(
    `select asset_webhooks.record_rate_limits('{archive,crm}', '{null,20}', '{null,5}', '{null,false}')`,
  );
  const { rows: recorded } = await db.pool.query(
    `select webhook_id, rate_per_second, rate_burst, rate_adaptive, rate_current, rate_tokens
     from asset_webhooks.webhook_queues order by webhook_id`,
  );
  expect(recorded).toEqual([
    {
      webhook_id: 'crm',
      rate_per_second: 20,
      rate_burst: 5,
      rate_adaptive: false,
      rate_current: 20,
      rate_tokens: 5,
    },
  ]);
  // Updated in place: room on its pages for HOT updates.
  const { rows: options } = await db.pool.query<{ reloptions: string[] }>(
    `select reloptions from pg_class where oid = 'asset_webhooks.webhook_queues'::regclass`,
  );
  expect(options[0]!.reloptions).toEqual(['fillfactor=50']);
});
