import type pg from 'pg';
import { describeError } from '../db/connect.js';
import { assertSchemaCurrent } from '../migrate/migrate.js';

export interface ReadinessSource {
  readonly pool: pg.Pool;
  /** Whether graphile-worker (coalescing, maintenance) is running. */
  workerRunning(): boolean;
  /** Whether a valid configuration is in use. */
  configLoaded(): boolean;
}

/** Why the service is not ready, as a short reason, or null when it is. */
export type NotReady = {
  readonly check: 'worker' | 'database' | 'schema' | 'configuration' | 'coalescing';
  readonly reason: string;
};

/**
 * Readiness: the worker runs, the database answers within two seconds, its
 * schema is the one this code expects, a configuration is loaded, and the
 * latest coalescing run that has an outcome (asset_webhooks.ticks) finished
 * rather than failed. The first check that fails is the answer.
 */
export async function checkReadiness(source: ReadinessSource): Promise<NotReady | null> {
  if (!source.workerRunning()) return { check: 'worker', reason: 'the worker that runs coalescing is not running' };
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
