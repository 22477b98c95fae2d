import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

it('0004 gives every member webhook of a live installation its time, the last one sent for the asset, as payload text', async () => {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.mirror_members');
  // The installation as migration 0003 left it: members of one and of two mirror webhooks, and an asset that left every set.
  await undoMigrationsAfter(db.pool, 4);
  await db.pool.query(`alter table asset_webhooks.mirror_members drop column sent_at;
    alter table asset_webhooks.webhooks drop column config_paused, drop column gone_since, drop column gone_payload_id;
    alter table asset_webhooks.attempts drop constraint attempts_outcome_check;
    alter table asset_webhooks.attempts add constraint attempts_outcome_check
      check (outcome in ('delivered', 'retry', 'rejected', 'retries_exhausted', 'expired'));
    delete from asset_webhooks.migrations where id >= 4`);
  await db.pool.query(`insert into asset_webhooks.mirror_members (asset_id, webhooks, last_event_at) values
    (1, '{shop}', '2026-12-07T10:00:00.120Z'),
    (2, '{shop,index}', '2026-12-07T10:00:01Z'),
    (3, '{}', '2026-12-07T10:00:02.003Z')`);

  const result = await migrate(db.pool);
  expect(result.applied).toEqual(migrationsFrom(4));
  const { rows } = await db.pool.query<{ asset_id: string; sent_at: Record<string, string> }>(
    'select asset_id::text, sent_at from asset_webhooks.mirror_members order by asset_id',
  );
  expect(rows).toEqual([
    { asset_id: '1', sent_at: { shop: '2026-12-07T10:00:00.120Z' } },
    { asset_id: '2', sent_at: { shop: '2026-12-07T10:00:01.000Z', index: '2026-12-07T10:00:01.000Z' } },
    { asset_id: '3', sent_at: {} },
  ]);
});
