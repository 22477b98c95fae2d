import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

it('0006 upgrades a live installation: rows captured before it keep no context, and the binding captures one without a change', async () => {
  await resetData(db.pool);
  // The installation as migration 0005 left it, with a change not coalesced yet and one coalesced.
  await undoMigrationsAfter(db.pool, 6);
  await db.pool.query(`alter table asset_webhooks.outbox drop column traceparent;
    alter table asset_webhooks.events drop column traceparent;
    alter table asset_webhooks.coalesce_runs drop column traceparent;
    delete from asset_webhooks.migrations where id >= 6`);
  await db.pool.query('insert into assets (asset_id) values (1)');
  await db.pool
    .query(`insert into asset_webhooks.events (event_id, seq, occurred_at, event_type, asset_id, coalesced_at)
    values ('01900000-0000-7000-8000-000000000001', 1, now(), 'CREATED', 1, now())`);

  const result = await migrate(db.pool, { binding: 'reference' });
  expect(result.applied).toEqual(migrationsFrom(6));
  const { rows: before } = await db.pool.query<{ traceparent: string | null }>(
    'select traceparent from asset_webhooks.outbox union all select traceparent from asset_webhooks.events',
  );
  expect(before).toEqual([{ traceparent: null }, { traceparent: null }]);

  // The reference binding's triggers, reinstalled as they were, store the transaction's context.
  const client = await db.pool.connect();
  try {
    await client.query('begin');
    await client.query("select set_config('asset_webhooks.traceparent', $1, true)", [TRACEPARENT]);
    await client.query("update assets set title = 'after' where asset_id = 1");
    await client.query('commit');
  } finally {
    client.release();
  }
  const { rows: after } = await db.pool.query<{ event_type: string; traceparent: string | null }>(
    'select event_type::text, traceparent from asset_webhooks.outbox order by seq',
  );
  expect(after).toEqual([
    { event_type: 'CREATED', traceparent: null },
    { event_type: 'EDITED', traceparent: TRACEPARENT },
  ]);
});
