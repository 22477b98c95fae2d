import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { oldestTransactionAge } from '../db/long-transactions.js';
import { captureGaps } from '../migrate/binding-check.js';

/** What the gauges show from the database, read in one pass (see readDatabaseValues). */
export interface DatabaseValues {
  readonly readAt: number;
  readonly outboxRows: number;
  readonly outboxOldestAgeSeconds: number;
  readonly oldestTransactionAgeSeconds: number;
  readonly pending: ReadonlyArray<readonly [string, number]>;
  readonly paused: readonly string[];
  /** Webhooks a 410 Gone answer suspended (retry.disableOnGone). */
  readonly suspended: readonly string[];
  readonly webhookStates: ReadonlyArray<readonly [string, string]>;
  readonly deadLetters: ReadonlyArray<readonly [string, number]>;
  readonly captureErrors: ReadonlyArray<{ readonly table: string; readonly operation: string; readonly n: number }>;
  readonly captureGaps: number;
  /** Webhooks with a rateLimit: the rate in force, and the seconds their payloads have waited for it. */
  readonly rates: ReadonlyArray<{ readonly webhook: string; readonly perSecond: number; readonly heldSeconds: number }>;
}

/**
 * Reads every database value the gauges show. One query after the other, so
 * that a refresh holds at most one of the pool's connections, which delivery
 * shares.
 */
export async function readDatabaseValues(pool: pg.Pool): Promise<DatabaseValues> {
  const {
    rows: [outbox],
  } = await pool.query<{ n: number; age: number | null }>(
    'select count(*)::int as n, extract(epoch from now() - min(occurred_at))::float8 as age from asset_webhooks.outbox',
  );
  const oldestTransaction = await oldestTransactionAge(pool);
  const { rows: pending } = await pool.query<{ webhook_id: string; n: number }>(
    `select webhook_id, count(*)::int as n from asset_webhooks.payloads where status in ('open', 'pending') group by webhook_id`,
  );
  // A webhook held by both its document and a 410 shows in both.
  const { rows: held } = await pool.query<{ webhook_id: string; paused: boolean; gone: boolean }>(
    `select webhook_id, config_paused as paused, gone_since is not null as gone
     from asset_webhooks.webhooks where paused_since is not null`,
  );
  const { rows: states } = await pool.query<{ webhook_id: string; state: string }>(
    `select webhook_id,
            case when hold_until > asset_webhooks.now() then 'throttled' when failing_since is not null then 'backing_off' else 'healthy' end as state
     from asset_webhooks.webhooks where enabled`,
  );
  const { rows: deadLetters } = await pool.query<{ webhook_id: string; n: number }>(
    `select webhook_id, count(*)::int as n from asset_webhooks.payloads where status = 'dead_lettered' group by webhook_id`,
  );
  const { rows: captureErrors } = await pool.query<{ table_name: string; operation: string; n: number }>(
    'select table_name, operation, count(*)::int as n from asset_webhooks.capture_errors group by table_name, operation',
  );
  const gaps = await captureGaps(pool);
  // The spell under way counts up to now: the total only grows, as a counter's must.
  const { rows: rates } = await pool.query<{ webhook_id: string; rate: number; held: number }>(
    `select webhook_id, rate_current as rate,
            rate_held_seconds
              + coalesce(greatest(extract(epoch from asset_webhooks.now() - rate_held_since)::float8, 0), 0) as held
     from asset_webhooks.webhook_queues where rate_per_second is not null`,
  );
  return {
    readAt: performance.now(),
    outboxRows: outbox?.n ?? 0,
    outboxOldestAgeSeconds: Math.max(0, outbox?.age ?? 0),
    oldestTransactionAgeSeconds: oldestTransaction?.seconds ?? 0,
    pending: pending.map((row) => [row.webhook_id, row.n] as const),
    paused: held.filter((row) => row.paused).map((row) => row.webhook_id),
    suspended: held.filter((row) => row.gone).map((row) => row.webhook_id),
    webhookStates: states.map((row) => [row.webhook_id, row.state] as const),
    deadLetters: deadLetters.map((row) => [row.webhook_id, row.n] as const),
    captureErrors: captureErrors.map((row) => ({ table: row.table_name, operation: row.operation, n: row.n })),
    captureGaps: gaps.length,
    rates: rates.map((row) => ({ webhook: row.webhook_id, perSecond: row.rate, heldSeconds: row.held })),
  };
}
