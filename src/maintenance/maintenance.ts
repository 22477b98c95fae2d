import type pg from 'pg';
import type { Logger } from 'pino';
import { dispatchWebhooks } from '../coalesce/persist.js';
import { oldestTransactionAge } from '../db/long-transactions.js';
import { inTransaction } from '../db/transaction.js';

export interface MaintenanceOptions {
  readonly pool: pg.Pool;
  readonly retentionDays: number;
  readonly deadLetterAfterSeconds: number;
  readonly logger: Logger;
  /** Rows deleted per statement, so no statement holds long locks. Default 5,000. */
  readonly batchSize?: number;
  /** Warn about a transaction open this long while payloads wait. Default 600 s. */
  readonly longTransactionSeconds?: number;
  /**
   * An unfinished attempt whose process holds no lease (it died) is handed
   * back once it started this long ago; null leaves such attempts to the
   * ten-minute rule this time. The service passes processGoneGrace(): its
   * request timeout plus 30 s, and null until its own lease has been held for
   * a minute. Default 60 s.
   */
  readonly processGoneGraceSeconds?: number | null;
}

export interface MaintenanceResult {
  readonly expired: number;
  readonly redispatched: number;
  readonly deleted: Record<string, number>;
}

/**
 * How long after its attempt started a dispatched payload without a live job
 * is handed back (and sent again). Delivery keeps trying to record a result
 * for less than this (deliver.ts), so the two never overlap.
 */
export const HAND_BACK_AFTER_MINUTES = 10;

/** How long a process holds its own lease before it takes other processes for dead. */
export const OWN_LEASE_SETTLE_MS = 60_000;

/**
 * The service's processGoneGraceSeconds: its request timeout plus 30 s (a live
 * process's request has ended by then, whatever its lease says), but null
 * until this process has held its own lease for OWN_LEASE_SETTLE_MS: after the
 * database came back, every live process has taken its lease again by then.
 */
export function processGoneGrace(ownLeaseHeldForMs: number, requestTimeoutSeconds: number): number | null {
  return ownLeaseHeldForMs >= OWN_LEASE_SETTLE_MS ? requestTimeoutSeconds + 30 : null;
}

/**
 * The periodic housekeeping of the service (once a minute):
 *  - payloads that wait undispatched past deadLetterAfterSeconds (a disabled
 *    webhook, or behind a stuck one) are dead-lettered as `expired`, except
 *    while their webhook is paused;
 *  - payloads marked dispatched whose attempt was started by a process that
 *    is gone (its lease is free: asset_webhooks.process_gone), or whose delivery job is
 *    gone (it failed for good on errors of our own) or has been locked for
 *    over ten minutes by a worker that died (graphile-worker frees such locks
 *    only after hours), are handed back to the pump, so none waits on a dead
 *    worker;
 *  - consumed events, finished payloads, runs and ticks older than
 *    retentionDays are removed in small batches;
 *  - while payloads wait, a transaction open for longer than
 *    longTransactionSeconds is logged: the dead rows of every delivery stay
 *    until it ends, and delivering a backlog slows down more the longer it is.
 */
export async function runMaintenance(options: MaintenanceOptions): Promise<MaintenanceResult> {
  const { pool, logger } = options;
  const batchSize = options.batchSize ?? 5000;

  const { rows: expired } = await pool.query<{ webhook_id: string }>(
    `update asset_webhooks.payloads
     set status = 'dead_lettered', dead_letter_reason = 'expired', dead_lettered_at = now()
     where status = 'pending' and not dispatched
       and series_started_at <= now() - make_interval(secs => $1)
       -- A paused webhook's clock stands still: its payloads are not expired
       -- while it is paused; the resume moves their series_started_at forward.
       and not exists (select 1 from asset_webhooks.webhooks w
                       where w.webhook_id = payloads.webhook_id and w.paused_since is not null)
     returning webhook_id`,
    [options.deadLetterAfterSeconds],
  );
  // A payload taken into a delivery chain has no job of its own: when its
  // worker died, its attempt is left without a result, and is closed here.
  // An attempt that names its process is handed back as soon as the process
  // is gone (after the grace period); one that does not (started by a session
  // named otherwise) ten minutes after it started, as is a payload whose job died.
  const { rows: orphaned } = await pool.query<{ webhook_id: string }>(
    `with orphaned as (
       update asset_webhooks.payloads p set dispatched = false
       where p.status = 'pending' and p.dispatched
         and ((coalesce(p.next_attempt_at, p.last_attempt_at, p.series_started_at) < now() - make_interval(mins => $1)
               and not exists (
                 select 1 from graphile_worker.jobs j
                 where j.key in (asset_webhooks.deliver_job_key(p.payload_id, p.series, p.attempts),
                                 asset_webhooks.deliver_job_key(p.payload_id, p.series, p.attempts + 1))
                   and j.attempts < j.max_attempts
                   and (j.locked_at is null or j.locked_at > now() - make_interval(mins => $1))))
           or exists (
                 select 1 from asset_webhooks.attempts a
                 where a.payload_id = p.payload_id and a.series = p.series and a.attempt_no = p.attempts
                   and $2::integer is not null and a.outcome is null and a.process_id is not null
                   and a.started_at < now() - make_interval(secs => $2::integer)
                   and asset_webhooks.process_gone(a.process_id)))
       returning p.payload_id, p.series, p.attempts, p.webhook_id
     ),
     interrupted as (
       update asset_webhooks.attempts a
       set outcome = 'retry', error_class = 'interrupted', error_message = 'the worker stopped before the attempt was recorded'
       from orphaned o
       where a.payload_id = o.payload_id and a.series = o.series and a.attempt_no = o.attempts and a.outcome is null
     )
     select webhook_id from orphaned`,
    [HAND_BACK_AFTER_MINUTES, options.processGoneGraceSeconds === undefined ? 60 : options.processGoneGraceSeconds],
  );
  await dispatchWebhooks(pool, [...expired, ...orphaned].map((row) => row.webhook_id));
  if (expired.length > 0) logger.warn({ payloads: expired.length }, 'waiting payloads expired and were dead-lettered');
  if (orphaned.length > 0) logger.warn({ payloads: orphaned.length }, 'payloads whose delivery was interrupted (its process is gone, or its job was lost) were handed back');

  await warnOfLongTransaction(options);

  const deleted: Record<string, number> = {};
  const cutoff = `now() - make_interval(days => $1)`;
  // Each batch walks the index of its time column from the oldest row, so a
  // purge costs what it deletes, not the size of the history it keeps
  // (sql/migrations/0001_baseline.sql has those indexes). Sequential scans are off for the statement: with
  // statistics taken while a table was empty, the planner would read the
  // whole table every minute instead.
  const purge = async (name: string, sql: string): Promise<void> => {
    let total = 0;
    for (;;) {
      const count = await inTransaction(pool, async (client) => {
        await client.query('set local enable_seqscan = off');
        const { rowCount } = await client.query(sql, [options.retentionDays, batchSize]);
        return rowCount ?? 0;
      });
      total += count;
      if (count < batchSize) break;
    }
    if (total > 0) deleted[name] = total;
  };
  await purge('events', `delete from asset_webhooks.events where event_id in (
    select event_id from asset_webhooks.events where coalesced_at < ${cutoff} order by coalesced_at limit $2)`);
  // A payload ends after it is created, so asking for created_at below the
  // cutoff as well removes nothing that is due and lets payloads_created lead
  // the way. Where an end time comes before the creation (a too_large payload,
  // dead-lettered microseconds before its created_at in the statement that
  // creates it; an end time from a Node clock behind the database's), the
  // payload is purged that much later. Rows created before the cutoff that
  // are not due (an old payload redelivered recently) are read again by each
  // batch: few, and never more than the whole table the purge read before.
  await purge('payloads', `delete from asset_webhooks.payloads where payload_id in (
    select payload_id from asset_webhooks.payloads
    where created_at < ${cutoff}
      and ((status = 'delivered' and delivered_at < ${cutoff})
        or (status = 'dead_lettered' and dead_lettered_at < ${cutoff}))
    order by created_at
    limit $2)`);
  await purge('coalesce_runs', `delete from asset_webhooks.coalesce_runs where run_id in (
    select run_id from asset_webhooks.coalesce_runs where started_at < ${cutoff} order by started_at limit $2)`);
  await purge('ticks', `delete from asset_webhooks.ticks where slot in (
    select slot from asset_webhooks.ticks where created_at < ${cutoff} order by created_at limit $2)`);
  if (Object.keys(deleted).length > 0) logger.info({ deleted }, 'retention cleanup');
  return { expired: expired.length, redispatched: orphaned.length, deleted };
}

async function warnOfLongTransaction(options: MaintenanceOptions): Promise<void> {
  const oldest = await oldestTransactionAge(options.pool);
  if (!oldest || oldest.seconds < (options.longTransactionSeconds ?? 600)) return;
  const { rows } = await options.pool.query<{ waiting: boolean }>(
    "select exists (select 1 from asset_webhooks.payloads where status = 'pending') as waiting");
  if (!rows[0]?.waiting) return;
  options.logger.warn(
    { ageSeconds: Math.round(oldest.seconds), pid: oldest.pid, applicationName: oldest.applicationName, state: oldest.state },
    'a long open transaction holds back the cleanup of delivered payloads: delivery slows until it ends (sql/runbooks/backlog-and-lag.sql)');
}
