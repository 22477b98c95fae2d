import type pg from 'pg';

/**
 * The end of a payload's lifecycle, part of the lifecycle module
 * (docs/payload-lifecycle.md): retention deletes delivered and dead-lettered
 * payloads (their attempts and redeliveries with them) whose end and creation
 * are both older than `retentionDays` by the one clock, asset_webhooks.now().
 */

/**
 * The retention cutoff as SQL, `days` its placeholder: one clock for every
 * table retention purges. A subquery, computed once per statement: compared
 * with a volatile function call, a time column's index could not be used.
 */
export function retentionCutoff(days: string): string {
  return `(select asset_webhooks.now() - make_interval(days => ${days}))`;
}

/**
 * Deletes up to `limit` payloads past retention, oldest first; returns how
 * many. A payload ends after it is created, so asking for created_at below
 * the cutoff as well removes nothing that is due and lets payloads_created
 * lead the way. Rows created before the cutoff that are not due (an old
 * payload redelivered recently) are read again by each batch: few, and never
 * more than the whole table. Run it with sequential scans off (see
 * src/maintenance/maintenance.ts).
 */
export async function purgePayloads(client: pg.ClientBase, retentionDays: number, limit: number): Promise<number> {
  const cutoff = retentionCutoff('$1');
  const { rows } = await client.query<{ purged: number }>(
    `with gone as (
       delete from asset_webhooks.payloads where payload_id in (
         select payload_id from asset_webhooks.payloads
         where created_at < ${cutoff}
           and ((status = 'delivered' and delivered_at < ${cutoff})
             or (status = 'dead_lettered' and dead_lettered_at < ${cutoff}))
           -- A body other payloads still name stays (payloads.body_of).
           and not exists (select 1 from asset_webhooks.payloads s where s.body_of = payloads.payload_id)
         order by created_at
         limit $2)
       returning payload_id
     ),
     -- The attempt log has no foreign key (one insert per result, no lock on the payload): its rows go here.
     logged as (delete from asset_webhooks.attempt_log a using gone g where a.payload_id = g.payload_id)
     select count(*)::int as purged from gone`,
    [retentionDays, limit],
  );
  return rows[0]?.purged ?? 0;
}
