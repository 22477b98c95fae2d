import type pg from 'pg';
import type { Logger } from 'pino';
import { parseConfigText } from '../../src/config/load.js';
import { readInstallationId } from '../../src/db/installation.js';
import type { DeliveryContext } from '../../src/delivery/context.js';
import { ServiceMetrics } from '../../src/service/metrics.js';
import { deliveryContext, ServiceState, syncWebhooks } from '../../src/service/service-state.js';
import { silentLogger, TEST_PROCESS_ID } from './seed.js';

export interface TestDelivery {
  readonly context: DeliveryContext;
  readonly state: ServiceState;
  close(): Promise<void>;
}

/**
 * The delivery context the service builds, for a configuration document,
 * with its webhooks recorded. Time moves with the database's clock (see
 * db-clock.ts), never with a clock of this process.
 */
export async function testDelivery(
  pool: pg.Pool,
  yaml: string,
  options: { logger?: Logger; stopping?: AbortSignal } = {},
): Promise<TestDelivery> {
  const state = new ServiceState(parseConfigText(yaml, 'test'));
  await syncWebhooks(pool, state.config, { processId: TEST_PROCESS_ID, logger: silentLogger });
  const context = deliveryContext(
    pool,
    await readInstallationId(pool),
    () => state,
    options.logger ?? silentLogger,
    new ServiceMetrics(pool),
    options.stopping,
  );
  return { context, state, close: () => state.close() };
}

/** Inserts `count` pending payloads of a webhook (bodies {"n":1}, {"n":2}, ...), returning their ids in order. */
export async function insertPayloads(
  pool: pg.Pool,
  webhookId: string,
  count: number,
  seriesStartedAt?: Date,
): Promise<number[]> {
  const { rows } = await pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, series_started_at)
     select $1, 'pending', '{"n":' || n || '}', 8, 1, '{}'::uuid[], coalesce($3::timestamptz, clock_timestamp())
     from generate_series(1, $2::int) n
     returning payload_id`,
    [webhookId, count, seriesStartedAt ?? null],
  );
  return rows.map((row) => row.payload_id).sort((a, b) => a - b);
}

/**
 * Gives pending payloads their slots as a claim does: an in_flight row each,
 * attempt `attemptNo` (default 1) started now, or, with `retryAt` (SQL, e.g.
 * `now() + interval '1 minute'`), holding the slot for its retry after that
 * attempt. A test then settles them as the service would.
 */
export async function holdSlots(
  pool: pg.Pool,
  ids: readonly number[],
  options: { attemptNo?: number; retryAt?: string; sent?: boolean; processId?: string | null } = {},
): Promise<void> {
  await pool.query(
    `insert into asset_webhooks.in_flight (payload_id, webhook_id, series, attempt_no, started_at, sent, process_id,
                                           next_attempt_at)
     select p.payload_id, p.webhook_id, p.series, $2, now(), $3, $4, ${options.retryAt ?? 'null'}
     from asset_webhooks.payloads p where p.payload_id = any($1::bigint[])`,
    [ids, options.attemptNo ?? 1, options.sent ?? true, options.processId ?? null],
  );
}

/** Payloads with their slot, for reading a payload's delivery state: `p` and `f` (null when it holds none). */
export const PAYLOADS_WITH_SLOTS =
  'asset_webhooks.payloads p left join asset_webhooks.in_flight f on f.payload_id = p.payload_id';
