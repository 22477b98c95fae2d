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
}

/** How long after a local fault the process is not ready. */
export const LOCAL_FAULT_NOT_READY_SECONDS = 60;

/** Why the service is not ready, as a short reason, or null when it is. */
export type NotReady = {
  readonly check: 'worker' | 'database' | 'schema' | 'configuration' | 'coalescing' | 'local_resources';
  readonly reason: string;
};

/**
 * Readiness: the worker runs, the database answers within two seconds, its
 * schema is the one this code expects, a configuration is loaded, and the
 * latest coalescing run that has an outcome (asset_webhooks.ticks) finished
 * rather than failed, and no delivery attempt has failed for want of this
 * process's file descriptors or memory in the last
 * LOCAL_FAULT_NOT_READY_SECONDS. The first check that fails is the answer.
 */
export async function checkReadiness(source: ReadinessSource): Promise<NotReady | null> {
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
    const { rows } = await withinTwoSeconds(
      source.pool.query<{ error: string | null }>(
        `select error from asset_webhooks.ticks where finished_at is not null or error is not null order by slot desc limit 1`,
      ),
    );
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
