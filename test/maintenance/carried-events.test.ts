import pg from 'pg';
import { pino } from 'pino';
import { beforeEach, expect, it } from 'vitest';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A payload's body is assembled from the events it carries, so retention keeps
// an event for as long as any payload that carries it exists, whatever the
// event's age; and it does so without reading, batch after batch, the events
// it keeps.

const db = useTestDatabase();
const logger = pino({ level: 'silent' });

beforeEach(async () => {
  await resetData(db.pool);
});

/**
 * A payload of `events` events of its own, coalesced `coalescedDaysAgo` days
 * ago, in the given state; returns its id and its events' ids.
 */
async function payloadWithEvents(
  webhookId: string,
  events: number,
  coalescedDaysAgo: number,
  state: string,
): Promise<{ payloadId: number; eventIds: string[] }> {
  const {
    rows: [payload],
  } = await db.pool.query<{ payload_id: number; event_ids: string[] }>(
    `insert into asset_webhooks.payloads (webhook_id, status, webhook_timestamp, byte_size, event_count, event_ids, created_at,
                                          delivered_at, dead_lettered_at, dead_letter_reason)
     select $1, s.status, now(), 51, $2, array(select gen_random_uuid() from generate_series(1, $2::int)),
            now() - make_interval(days => $3),
            case when s.status = 'delivered' then s.ended end, case when s.status = 'dead_lettered' then s.ended end,
            case when s.status = 'dead_lettered' then 'rejected' end
     from (select split_part($4, ':', 1) as status, now() - make_interval(days => coalesce(nullif(split_part($4, ':', 2), '')::int, $3)) as ended) s
     returning payload_id, event_ids::text[] as event_ids`,
    [webhookId, events, coalescedDaysAgo, state],
  );
  await db.pool.query(
    `insert into asset_webhooks.events (event_id, occurred_at, event_type, asset_id, coalesced_at, delivered_to, payload_ids)
     select u.id, now() - make_interval(days => $3), 'EDITED', u.n, now() - make_interval(days => $3), '{1}', array[$2::bigint]
     from unnest($1::uuid[]) with ordinality as u(id, n)`,
    [payload!.event_ids, payload!.payload_id, coalescedDaysAgo],
  );
  return { payloadId: payload!.payload_id, eventIds: payload!.event_ids };
}

async function remaining(ids: readonly string[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'select count(*)::int as n from asset_webhooks.events where event_id = any($1::uuid[])',
    [ids],
  );
  return rows[0]!.n;
}

it('keeps the events of every payload that still exists, however old, and purges them with their last payload', async () => {
  // Old and finished: purged with its events.
  const done = await payloadWithEvents('crm', 3, 40, 'delivered');
  // A paused webhook's backlog, coalesced long ago: waits, with its events.
  const waiting = await payloadWithEvents('paused', 3, 40, 'pending');
  // A dead letter an operator redelivered and that died again recently: it can be redelivered again.
  const redelivered = await payloadWithEvents('crm', 2, 40, 'dead_lettered:1');
  // Excluded for every webhook: no payload carries it, it goes by age.
  await db.pool.query(
    `insert into asset_webhooks.events (event_id, occurred_at, event_type, asset_id, coalesced_at)
     values (gen_random_uuid(), now(), 'EDITED', 99, now() - interval '40 days')`,
  );
  // An event carried to two webhooks: one payload purged, the other still waiting.
  const shared = await payloadWithEvents('crm', 1, 40, 'delivered');
  const {
    rows: [other],
  } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, webhook_timestamp, byte_size, event_count, event_ids, created_at)
     values ('paused', 'pending', now(), 51, 1, $1::uuid[], now() - interval '40 days') returning payload_id`,
    [shared.eventIds],
  );
  await db.pool.query(
    'update asset_webhooks.events set payload_ids = array[$1::bigint, $2::bigint] where event_id = $3',
    [shared.payloadId, other!.payload_id, shared.eventIds[0]],
  );

  const result = await runMaintenance({ pool: db.pool, retentionDays: 30, logger, batchSize: 2 });
  expect(result.deleted).toEqual({ events: 4, payloads: 2 });
  expect(await remaining(done.eventIds)).toBe(0);
  expect(await remaining(waiting.eventIds)).toBe(3);
  expect(await remaining(redelivered.eventIds)).toBe(2);
  expect(await remaining(shared.eventIds)).toBe(1);
  // Each kept payload still assembles its whole body.
  const { rows } = await db.pool.query<{ payload_id: number; count: number }>(
    `select payload_id, (asset_webhooks.payload_body(p)::jsonb ->> 'count')::int as count
     from asset_webhooks.payloads p order by payload_id`,
  );
  expect(rows).toEqual([
    { payload_id: waiting.payloadId, count: 3 },
    { payload_id: redelivered.payloadId, count: 2 },
    { payload_id: other!.payload_id, count: 1 },
  ]);

  // Once the last payload that carries them is gone, so are they.
  await db.pool.query(
    "update asset_webhooks.payloads set status = 'delivered', delivered_at = now() - interval '31 days' where payload_id = any($1)",
    [[waiting.payloadId, other!.payload_id]],
  );
  const second = await runMaintenance({ pool: db.pool, retentionDays: 30, logger, batchSize: 2 });
  expect(second.deleted).toEqual({ events: 4, payloads: 2 });
  expect(await remaining([...waiting.eventIds, ...shared.eventIds])).toBe(0);
  expect(await remaining(redelivered.eventIds)).toBe(2);
});

it('leaves an event coalesced after the cutoff to its own age when its payload goes first', async () => {
  // Its payload was created before the cutoff; the event, later in the same run, after it.
  const { payloadId, eventIds } = await payloadWithEvents('crm', 1, 29, 'delivered:31');
  await db.pool.query(
    "update asset_webhooks.payloads set created_at = now() - interval '31 days' where payload_id = $1",
    [payloadId],
  );
  const first = await runMaintenance({ pool: db.pool, retentionDays: 30, logger });
  expect(first.deleted).toEqual({ payloads: 1 });
  expect(await remaining(eventIds)).toBe(1);
  await db.pool.query("update asset_webhooks.events set coalesced_at = now() - interval '31 days'");
  const second = await runMaintenance({ pool: db.pool, retentionDays: 30, logger });
  expect(second.deleted).toEqual({ events: 1 });
  expect(await remaining(eventIds)).toBe(0);
});

it('does not read the old events it keeps, with statistics taken while the tables were empty', async () => {
  await db.pool.query('analyze asset_webhooks.payloads, asset_webhooks.events');
  // A paused webhook's backlog of 3,000 events older than the retention, and 5 payloads due.
  await payloadWithEvents('paused', 3000, 40, 'pending');
  for (let i = 0; i < 5; i += 1) await payloadWithEvents('crm', 2, 40, 'delivered');
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  const read = async (): Promise<number> => {
    await pool.query('select pg_stat_force_next_flush()');
    const { rows } = await db.pool.query<{ n: string }>(
      `select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n from pg_stat_user_tables
       where relid = 'asset_webhooks.events'::regclass`,
    );
    return Number(rows[0]!.n);
  };
  try {
    const before = await read();
    // Every run, not just the first: the kept backlog is never walked.
    for (let run = 0; run < 3; run += 1) {
      const result = await runMaintenance({ pool, retentionDays: 30, logger, batchSize: 4 });
      expect(result.deleted).toEqual(run === 0 ? { events: 10, payloads: 5 } : {});
    }
    // The 10 due events and their look-ups, where walking by age reads the 3,000 kept, three times.
    expect((await read()) - before).toBeLessThan(100);
  } finally {
    await pool.end();
  }
});
