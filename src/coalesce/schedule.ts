import type pg from 'pg';

/**
 * Schedules coalescing runs. graphile-worker's cron ticks at most once a
 * minute and its crontab is fixed when the runner starts, so it cannot follow
 * an `intervalSeconds` changed by a reload. Instead every `run` process calls
 * tick() often with the interval it currently has; the slot of the current
 * interval is inserted with ON CONFLICT DO NOTHING, and only the process whose
 * insert returns a row adds the job: the once-per-interval guarantee lives in
 * SQL, not in process memory.
 *
 * `notBefore` (epoch milliseconds, by the database's clock: see
 * databaseNowMs) skips an interval that began before it: a
 * process that starts, or reloads a new interval, in the middle of an interval
 * waits for the next boundary, as a cron schedule would, rather than running at
 * once. An interval another process already ticked is not ticked again either
 * way.
 *
 * No graphile-worker named queue serialises the runs: a worker that dies keeps
 * its queue locked until graphile-worker's stale-lock recovery (hours later).
 * coalesce() takes a session lock instead (src/db/session-lock.ts), free the
 * moment the dead worker's session ends.
 */
export async function tick(pool: pg.Pool, intervalSeconds: number, notBefore = 0): Promise<boolean> {
  const { rows } = await pool.query(
    `with current_slot as (
       select floor(extract(epoch from n.now) / $1)::bigint as slot, n.now from (select asset_webhooks.now() as now) n
     ), slot as (
       insert into asset_webhooks.ticks (slot, created_at)
       select slot, now from current_slot where slot * $1 * 1000 >= $2::float8
       on conflict do nothing
       returning slot
     )
     select graphile_worker.add_job('coalesce', json_build_object('slot', slot.slot),
              job_key := 'asset_webhooks_coalesce', max_attempts := 3)
     from slot`,
    [intervalSeconds, notBefore],
  );
  return rows.length > 0;
}

/**
 * The database's clock in epoch milliseconds. Slots are cut by the one clock
 * (asset_webhooks.now()), so the time a process started is read from the same
 * clock: a process whose own clock runs ahead would otherwise skip intervals
 * after it starts.
 */
export async function databaseNowMs(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ now: number }>(
    'select extract(epoch from asset_webhooks.now())::float8 * 1000 as now',
  );
  return rows[0]!.now;
}

/**
 * How often a process calls tick() for an interval: a quarter of it, between
 * 100 ms and one second. Ticking more often never runs more, only sooner after
 * the boundary.
 */
export function tickPeriodMs(intervalSeconds: number): number {
  return Math.min(1000, Math.max(100, (intervalSeconds * 1000) / 4));
}

/**
 * Records how the coalescing run of a tick ended: finished, or the error of
 * its latest try (one line). Readiness reports the latest tick that has an
 * outcome (see src/service/readiness.ts).
 */
export async function recordTickOutcome(pool: pg.Pool, slot: number, error: string | null): Promise<void> {
  await pool.query(
    `update asset_webhooks.ticks
     set finished_at = case when $2::text is null then asset_webhooks.now() end, error = $2
     where slot = $1`,
    [slot, error],
  );
}
