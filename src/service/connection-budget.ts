/**
 * The database connections one `run` process opens at most, by the
 * application_name each shows in pg_stat_activity. For sizing
 * max_connections, a role's CONNECTION LIMIT or a session-mode pooler:
 * a process never holds more than `total`.
 *
 * - `pool` (`asset-webhooks run <process id>`): deliveries (claims and
 *   results), coalescing, maintenance, reconciles, probes and metrics. One
 *   coalescing run holds up to three at once (its lock, its writer, a query).
 * - `worker` (`asset-webhooks worker`): graphile-worker's pool, its LISTEN
 *   connection and job fetching, two more than its concurrency.
 * - `listener` (`asset-webhooks delivery listener`): LISTEN for new payloads.
 * - `lease` (`asset-webhooks lease <process id>`): holds the process lease.
 */
export interface ConnectionBudget {
  readonly pool: number;
  readonly worker: number;
  readonly listener: 1;
  readonly lease: 1;
  readonly total: number;
}

/** The size of the process's own pool when `--database-pool-size` is not given. */
export const DEFAULT_DATABASE_POOL_SIZE = 12;
/** The smallest pool `run` accepts: a coalescing run holds three connections, and delivery needs one meanwhile. */
export const MIN_DATABASE_POOL_SIZE = 6;
/** graphile-worker's concurrency when `--concurrency` is not given. */
export const DEFAULT_WORKER_CONCURRENCY = 4;

export function connectionBudget(options: {
  readonly poolSize?: number | undefined;
  readonly concurrency?: number | undefined;
}): ConnectionBudget {
  const pool = options.poolSize ?? DEFAULT_DATABASE_POOL_SIZE;
  const worker = (options.concurrency ?? DEFAULT_WORKER_CONCURRENCY) + 2;
  return { pool, worker, listener: 1, lease: 1, total: pool + worker + 2 };
}
