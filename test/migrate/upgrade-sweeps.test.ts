import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

it('0003 keeps the backfills of a live installation adding up: exclusions counted before it are unrecorded', async () => {
  await resetData(db.pool);
  // The installation as migration 0002 left it, with a backfill interrupted and one completed.
  await undoMigrationsAfter(db.pool, 3);
  await db.pool.query(`alter table asset_webhooks.backfills drop column excluded_by;
    alter table asset_webhooks.webhooks drop column config_paused, drop column gone_since, drop column gone_payload_id;
    alter table asset_webhooks.attempts drop constraint attempts_outcome_check;
    alter table asset_webhooks.attempts add constraint attempts_outcome_check
      check (outcome in ('delivered', 'retry', 'rejected', 'retries_exhausted', 'expired'));
    alter table asset_webhooks.mirror_members drop column sent_at;
    delete from asset_webhooks.migrations where id >= 3`);
  await db.pool.query(`insert into asset_webhooks.backfills
      (webhook_id, assets_key, status, last_asset_id, assets_read, events_sent, excluded, payloads, requested_by)
    values ('crm', 'all', 'running', 1000, 1000, 800, 200, 8, 'test'),
           ('crm', 'x', 'completed', 10, 10, 10, 0, 1, 'test')`);

  const result = await migrate(db.pool);
  expect(result.applied).toEqual(migrationsFrom(3));
  const { rows } = await db.pool.query<{ status: string; excluded_by: Record<string, number> }>(
    'select status, excluded_by from asset_webhooks.backfills order by backfill_id',
  );
  expect(rows).toEqual([
    { status: 'running', excluded_by: { unrecorded: 200 } },
    { status: 'completed', excluded_by: {} },
  ]);
});
