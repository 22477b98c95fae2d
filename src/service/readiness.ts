import type pg from 'pg';
import { describeError } from '../db/connect.js';
import { assertSchemaCurrent } from '../migrate/migrate.js';

export interface ReadinessSource {
  readonly pool: pg.Pool;
  /** Whether graphile-worker (coalescing, maintenance) is running. */
  workerRunning(): boolean;
  /** Whether a valid configuration is in use. */
  configLoaded(): boolean;
  /** Seconds since a delivery attempt last failed for want of this process's resources (local_fault); null: never. */
  secondsSinceLocalFault?(): number | null;
  /**
   * The coalescing interval in use, and since when (epoch milliseconds by the
   * database's clock) runs are scheduled at it: the process's start, or the
   * reload that changed the interval.
   */
  coalescingSchedule(): { readonly intervalSeconds: number; readonly sinceMs: number };
  /** Why this process has stopped working for good (the schema moved past its release), or null. */
  superseded?(): string | null;
}

/** Beyond two intervals, how long a coalescing run may take to start before the service is not ready. */
export const COALESCING_START_MARGIN_SECONDS = 30;

/** How long after a local fault the process is not ready. */
export const LOCAL_FAULT_NOT_READY_SECONDS = 60;

/** Why the service is not ready, as a short reason, or null when it is. */
export type NotReady = {
  readonly check: 'worker' | 'database' | 'schema' | 'configuration' | 'coalescing' | 'local_resources';
  readonly reason: string;
};

/**
 * Readiness: the process has not stopped for a schema that moved past its
 * release (its worker is stopped then: that answer would mislead), the
 * worker runs, the database answers within two seconds, its schema is the
 * one this code expects, a configuration is loaded, a
 * coalescing run (of any process: asset_webhooks.coalesce_runs) has started
 * within two intervals plus COALESCING_START_MARGIN_SECONDS (counted from the
 * schedule's start when that is later), and the latest coalescing run that has
 * an outcome (asset_webhooks.ticks) finished rather than failed, and no
 * delivery attempt has failed for want of this process's file descriptors or
 * memory in the last LOCAL_FAULT_NOT_READY_SECONDS. The first check that
 * fails is the answer.
 */
export async function checkReadiness(source: ReadinessSource): Promise<NotReady | null> {
  const superseded = source.superseded?.() ?? null;
  if (superseded !== null) return { check: 'schema', reason: superseded };
  if (!source.workerRunning()) return { check: 'worker', reason: 'the worker that runs coalescing is not running' };
  const sinceLocalFault = source.secondsSinceLocalFault?.() ?? null;
  if (sinceLocalFault !== null && sinceLocalFault < LOCAL_FAULT_NOT_READY_SECONDS)
    return {
      check: 'local_resources',
      reason:
        `a delivery attempt failed ${Math.round(sinceLocalFault)}s ago because this process ran out of file descriptors or memory ` +
        '(error class local_fault): such attempts are retried without counting against the retries; raise the limit (ulimit -n, memory)',
    };
  if (!source.configLoaded()) return { check: 'configuration', reason: 'no configuration is loaded' };
  try {
    await withinTwoSeconds(source.pool.query('select 1'));
  } catch (error) {
    return { check: 'database', reason: `database not answering: ${describeError(error)}` };
  }
  try {
    await withinTwoSeconds(assertSchemaCurrent(source.pool));
  } catch (error) {
    return { check: 'schema', reason: describeError(error) };
  }
  try {
    const schedule = source.coalescingSchedule();
    const { rows } = await withinTwoSeconds(
      source.pool.query<{ error: string | null; waited: number }>(
        `select (select error from asset_webhooks.ticks where finished_at is not null or error is not null order by slot desc limit 1) as error,
                extract(epoch from asset_webhooks.now() - greatest((select max(started_at) from asset_webhooks.coalesce_runs),
                                                    to_timestamp($1::float8 / 1000)))::float8 as waited`,
        [schedule.sinceMs],
      ),
    );
    const waited = rows[0]?.waited ?? 0;
    const allowed = 2 * schedule.intervalSeconds + COALESCING_START_MARGIN_SECONDS;
    if (waited > allowed) {
      return {
        check: 'coalescing',
        reason:
          `no coalescing run has started for ${Math.floor(waited)}s, expected one every ${schedule.intervalSeconds}s ` +
          `(at most ${allowed}s: two intervals plus ${COALESCING_START_MARGIN_SECONDS}s)`,
      };
    }
    const error = rows[0]?.error;
    if (error) return { check: 'coalescing', reason: `the last coalescing run failed: ${error}` };
  } catch (error) {
    return { check: 'database', reason: `database not answering: ${describeError(error)}` };
  }
  return null;
}

function withinTwoSeconds<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out after 2s')), 2000);
    timer.unref();
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
