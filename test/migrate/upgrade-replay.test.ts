import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

it('0008 upgrades a live installation: its redeliveries stay redeliveries of dead letters, and its delivered payloads can be replayed', async () => {
  await resetData(db.pool);
  // The installation as migration 0007 left it: a dead letter redelivered once, and a payload delivered.
  await undoMigrationsAfter(db.pool, 8);
  await db.pool.query(`drop table asset_webhooks.replays;
    alter table asset_webhooks.redeliveries drop column replay_id;
    alter type asset_webhooks.payload_transition drop attribute replay_id;
    delete from asset_webhooks.migrations where id >= 8`);
  const { rows: ids } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, series,
                                          series_started_at, delivered_at)
     values ('crm', 'delivered', '{"count":0,"events":[],"webhookTimestamp":"2026-12-07T10:00:00.000Z"}', 66, 0, '{}', 2,
             now(), now()),
            ('crm', 'delivered', '{"count":0,"events":[],"webhookTimestamp":"2026-12-07T10:00:01.000Z"}', 66, 0, '{}', 1,
             now(), now())
     returning payload_id`,
  );
  const [redelivered, delivered] = ids.map((row) => row.payload_id);
  await db.pool.query(
    `insert into asset_webhooks.redeliveries (payload_id, series, requested_by, previous_reason)
     values ($1, 2, 'ops@host', 'rejected')`,
    [redelivered],
  );

  const result = await migrate(db.pool);
  expect(result.applied).toEqual(migrationsFrom(8));
  const { rows: before } = await db.pool.query(
    'select payload_id, series, previous_reason, replay_id from asset_webhooks.redeliveries',
  );
  expect(before).toEqual([{ payload_id: redelivered, series: 2, previous_reason: 'rejected', replay_id: null }]);

  // A replay's batch on the upgraded schema: a new series of the delivered payload, recorded with its replay.
  const {
    rows: [replay],
  } = await db.pool.query<{ replay_id: number }>(
    `insert into asset_webhooks.replays (webhook_id, from_time, to_time, selection_key, requested_by)
     values ('crm', now() - interval '1 hour', now(), 'k', 'ops@host') returning replay_id`,
  );
  const { rows: answers } = await db.pool.query(
    'select payload_id, applied, reason, series from asset_webhooks.replay_payloads($1::bigint[], $2, $3, null)',
    [[delivered], replay!.replay_id, 'ops@host'],
  );
  expect(answers).toEqual([{ payload_id: delivered, applied: true, reason: null, series: 2 }]);
  const { rows: after } = await db.pool.query(
    'select status, series, delivered_at from asset_webhooks.payloads where payload_id = $1',
    [delivered],
  );
  expect(after).toEqual([{ status: 'pending', series: 2, delivered_at: null }]);
  const { rows: recorded } = await db.pool.query(
    'select previous_reason, replay_id from asset_webhooks.redeliveries where payload_id = $1',
    [delivered],
  );
  expect(recorded).toEqual([{ previous_reason: null, replay_id: replay!.replay_id }]);
});
