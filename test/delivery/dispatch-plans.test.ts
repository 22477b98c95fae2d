import { expect, it } from 'vitest';
import { dispatchWebhooks } from '../../src/coalesce/persist.js';
import { registerWebhooks, openWebhook, resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

// PL/pgSQL keeps a function's plans for the life of its connection, so
// asset_webhooks.dispatch is planned at each call. A connection whose plans
// for dispatch were made while payloads was empty must not scan the whole
// table once it holds a backlog.
it('dispatch reads a grown backlog through its indexes on a connection that planned it on an empty table', async () => {
  await resetData(db.pool);
  await registerWebhooks(db.pool, [openWebhook('crm')], 4);
  await db.pool.query('analyze asset_webhooks.payloads');
  const client = await db.pool.connect();
  try {
    // Past PL/pgSQL's five custom plans, so the connection keeps a generic one made now.
    for (let call = 0; call < 8; call += 1) await dispatchWebhooks(client, ['crm']);
    await db.pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
       select 'crm', 'pending', '{}', 2, 0, '{}' from generate_series(1, 3000)`);
    // The counts below are this connection's not yet reported: report the earlier calls' first.
    await client.query('select pg_stat_force_next_flush()');
    await client.query('begin');
    await dispatchWebhooks(client, ['crm']);
    await dispatchWebhooks(client, ['crm']);
    const { rows: [reads] } = await client.query<{ seq_scan: number }>(
      "select seq_scan::int from pg_stat_xact_user_tables where schemaname = 'asset_webhooks' and relname = 'payloads'");
    await client.query('commit');
    // With plans kept for the connection: scans of the whole table (the plans made while it was empty).
    expect(reads).toEqual({ seq_scan: 0 });
    // And dispatch still did its work: the webhook's four slots were filled, in order.
    const { rows } = await db.pool.query<{ payload_id: number }>(
      "select payload_id::int from asset_webhooks.payloads where dispatched order by payload_id");
    expect(rows.map((row) => row.payload_id)).toEqual([1, 2, 3, 4]);
  } finally {
    client.release();
  }
});
