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
