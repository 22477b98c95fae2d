import type pg from 'pg';
import { EventIds } from './event-ids.js';

/** The highest seq committed so far: a run takes everything up to it. */
export async function outboxHighWater(client: pg.Pool | pg.PoolClient): Promise<number | null> {
  const { rows } = await client.query<{ max: number | null }>('select max(seq) as max from asset_webhooks.outbox');
  return rows[0]?.max ?? null;
}

/**
 * Records what the run needs to know of its start, in temporary tables of the
 * run's session, all read in the snapshot that gave `maxSeq` (one short
 * repeatable read transaction: see run.ts):
 *  - `aw_last_edit`: the latest EDITED row of every asset up to `maxSeq`
 *    (what its eventId derives from); collapsing needs it for rows of later chunks. One
 *    pass over the backlog per run replaces an index on the outbox, which
 *    every captured row paid for in the asset database's own writes.
 *  - `aw_unseen`: the ranges of seqs up to `maxSeq` that the snapshot did not
 *    see (consumed, rolled back, or not yet committed). A row a chunk later
 *    finds in one of them committed after the run began.
 *  - `aw_deferred`, empty: the assets whose rows the run leaves to the next
 *    one (see claimChunk).
 * Returns the derivation of the run's eventIds, read in the same transaction.
 */
export async function recordRunStart(session: pg.PoolClient, maxSeq: number): Promise<EventIds> {
  const ids = await EventIds.load(session);
  await session.query(
    `create temporary table if not exists aw_last_edit (asset_id bigint primary key, seq bigint not null, occurred_ms bigint not null, event_id uuid);
     create temporary table if not exists aw_unseen (lo bigint primary key, hi bigint not null);
     create temporary table if not exists aw_deferred (asset_id bigint primary key);
     truncate aw_last_edit, aw_unseen, aw_deferred`,
  );
  await session.query(
    `insert into aw_last_edit (asset_id, seq, occurred_ms, event_id)
     select l.asset_id, l.seq, floor(extract(epoch from o.occurred_at) * 1000)::bigint, o.event_id
     from (select asset_id, max(seq) as seq from asset_webhooks.outbox
           where event_type = 'EDITED' and seq <= $1 group by asset_id) l
     join asset_webhooks.outbox o on o.seq = l.seq`,
    [maxSeq],
  );
  await session.query(
    `insert into aw_unseen (lo, hi)
     select prev + 1, seq - 1
     from (select seq, lag(seq, 1, 0::bigint) over (order by seq) as prev from asset_webhooks.outbox where seq <= $1) s
     where seq > prev + 1`,
    [maxSeq],
  );
  await session.query('analyze aw_last_edit, aw_unseen');
  return ids;
}
