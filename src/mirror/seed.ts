import type pg from 'pg';
import { withCoalesceLock } from '../coalesce/coalesce-lock.js';
import { inTransaction } from '../db/transaction.js';
import { eventTimestampText } from '../db/event-timestamp.js';

/**
 * The set of a webhook that has just become a mirror one, seeded from what
 * it was sent as a plain webhook: each asset whose last event routed to it,
 * among the events retention still keeps (asset_webhooks.events), is not a
 * removal (PURGED, or an UNMATCHED of an earlier time as a mirror webhook)
 * enters the set, with that event's eventTimestamp (events.occurred_at holds
 * it as sent). Whatever the state of the payload that carries it: an asset
 * the receiver never got costs it one UNMATCHED it can ignore, an asset
 * missing from the set would stay in its copy forever. A DELETED is no
 * removal: the receiver holds the asset in the Trash. An asset moved to the
 * Trash or restored since its last event (the plain webhook's filters
 * excluded the move) is seeded all the same; the reconcile that follows
 * compares that event with the Trash and sends what puts the copy right.
 *
 * An asset the set lists already is left as it is: a coalescing run or
 * reconcile that routed by the mirror document knows better than history.
 * So seeding again (a retried job) adds nothing. The history is read first,
 * without the coalescing lock (a scan of the events retention keeps), into a
 * temporary table of the session; only the write takes the lock, the only
 * writer of mirror_members being its holder (see MirrorMembers). What a run
 * routes in between is no harm: an asset that entered the set meanwhile is
 * skipped, and one purged meanwhile gets the UNMATCHED of the reconcile that
 * follows (its members whose asset is gone). Returns how many assets entered
 * the set.
 */
export async function seedFromHistory(pool: pg.Pool, webhookId: string): Promise<number> {
  const session = await pool.connect();
  try {
    await session.query('drop table if exists pg_temp.mirror_seed');
    await session.query(LAST_TOLD, [webhookId]);
    const seeded = await withCoalesceLock(session, () =>
      inTransaction(session, async (client) => {
        const { rowCount } = await client.query(SEED, [webhookId]);
        return rowCount ?? 0;
      }),
    );
    await session.query('drop table pg_temp.mirror_seed');
    return seeded;
  } finally {
    session.release();
  }
}

/** Per asset, the last event routed to the webhook that is not a removal. */
const LAST_TOLD = `create temporary table mirror_seed as
  select t.asset_id, t.asset_uuid, t.occurred_at
  from (
    select distinct on (e.asset_id) e.asset_id, e.asset_uuid, e.occurred_at,
           e.event_type in ('PURGED', 'UNMATCHED') or w.position = any (coalesce(e.unmatched_to, '{}')) as removal
    from asset_webhooks.routing_webhooks w
    join asset_webhooks.events e on e.routing_id = w.routing_id and w.position = any (e.delivered_to)
    where w.webhook_id = $1
    order by e.asset_id, e.occurred_at desc, e.seq desc nulls last
  ) t
  where not t.removal`;

const SEED = `insert into asset_webhooks.mirror_members as m (asset_id, asset_uuid, webhooks, last_event_at, sent_at)
  select t.asset_id, t.asset_uuid, array[$1::text], t.occurred_at,
         jsonb_build_object($1::text, ${eventTimestampText('t.occurred_at')})
  from pg_temp.mirror_seed t
  on conflict (asset_id) do update
    set webhooks = m.webhooks || $1::text, last_event_at = greatest(m.last_event_at, excluded.last_event_at),
        sent_at = m.sent_at || excluded.sent_at, asset_uuid = coalesce(m.asset_uuid, excluded.asset_uuid),
        changed_at = clock_timestamp()
    where not $1::text = any (m.webhooks)`;
