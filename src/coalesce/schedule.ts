import type pg from 'pg';

/**
 * Schedules coalescing for intervals that graphile-worker's cron cannot
 * express (it ticks at most once a minute). Every `run` process calls tick()
 * often; the slot of the current interval is inserted with ON CONFLICT DO
 * NOTHING, and only the process whose insert returns a row adds the job: the
 * once-per-interval guarantee lives in SQL, not in process memory.
 *
 * No graphile-worker named queue serialises the runs: a worker that dies keeps
 * its queue locked until graphile-worker's stale-lock recovery (hours later).
 * coalesce() takes a session advisory lock instead, which PostgreSQL releases
 * the moment the dead worker's connection goes.
 */
export async function tick(pool: pg.Pool, intervalSeconds: number): Promise<boolean> {
  const { rows } = await pool.query(
    `with slot as (
       insert into asset_webhooks.ticks (slot)
       values (floor(extract(epoch from now()) / $1)::bigint)
       on conflict do nothing
       returning slot
     )
     select graphile_worker.add_job('coalesce', json_build_object('slot', slot.slot),
              job_key := 'asset_webhooks_coalesce', max_attempts := 3)
     from slot`,
    [intervalSeconds],
  );
  return rows.length > 0;
}

/**
 * The graphile-worker crontab for an interval that is a whole number of
 * minutes dividing an hour (the default, 60 seconds, is `* * * * *`), else
 * null (then tick() schedules). Maintenance runs every minute either way.
 */
export function crontabFor(intervalSeconds: number): string {
  const lines = ['* * * * * maintenance ?max=1&jobKey=asset_webhooks_maintenance'];
  const minutes = intervalSeconds / 60;
  if (Number.isInteger(minutes) && 60 % minutes === 0) {
    const schedule = minutes === 1 ? '* * * * *' : `*/${minutes} * * * *`;
    lines.push(`${schedule} coalesce ?max=1&jobKey=asset_webhooks_coalesce`);
  }
  return lines.join('\n');
}

/** Whether tick() must drive coalescing for this interval. */
export function needsTicker(intervalSeconds: number): boolean {
  return !crontabFor(intervalSeconds).includes(' coalesce ');
}
