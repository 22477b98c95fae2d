import type pg from 'pg';
import type { Logger } from 'pino';
import { parseConfigText } from '../../src/config/load.js';
import type { DeliveryContext } from '../../src/delivery/deliver.js';
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
 * with its webhooks recorded; `clock` moves time for the delivery rules.
 */
export async function testDelivery(
  pool: pg.Pool,
  yaml: string,
  options: { logger?: Logger; clock?: () => Date; stopping?: AbortSignal } = {},
): Promise<TestDelivery> {
  const state = new ServiceState(parseConfigText(yaml, 'test'));
  await syncWebhooks(pool, state.config, { processId: TEST_PROCESS_ID, logger: silentLogger });
  const context = deliveryContext(
    pool,
    () => state,
    options.logger ?? silentLogger,
    new ServiceMetrics(pool),
    options.stopping,
    options.clock,
  );
  return { context, state, close: () => state.close() };
}

/**
 * Inserts `count` pending payloads of a webhook, as coalescing stores them:
 * payload n carries one event of its own, of asset n, in
 * asset_webhooks.events (see bodyNumber). Returns their ids in order.
 */
export async function insertPayloads(
  pool: pg.Pool,
  webhookId: string,
  count: number,
  seriesStartedAt?: Date,
): Promise<number[]> {
  const { rows } = await pool.query<{ payload_id: number }>(
    `with made as (
       insert into asset_webhooks.payloads (webhook_id, status, webhook_timestamp, byte_size, event_count, event_ids, series_started_at)
       select $1, 'pending', now(), 0, 1, array[gen_random_uuid()], coalesce($3::timestamptz, clock_timestamp())
       from generate_series(1, $2::int) n
       order by n
       returning payload_id, event_ids
     ),
     numbered as (select m.*, row_number() over (order by m.payload_id) as n from made m),
     carried as (
       insert into asset_webhooks.events (event_id, occurred_at, event_type, asset_id, asset_uuid, atom_id, coalesced_at, payload_ids)
       select m.event_ids[1], clock_timestamp(), 'EDITED', m.n, gen_random_uuid(), null, clock_timestamp(), array[m.payload_id]
       from numbered m
     )
     select payload_id from made`,
    [webhookId, count, seriesStartedAt ?? null],
  );
  const ids = rows.map((row) => row.payload_id).sort((a, b) => a - b);
  await pool.query(
    `update asset_webhooks.payloads p set byte_size = octet_length(asset_webhooks.payload_body(p))
     where p.payload_id = any($1::bigint[])`,
    [ids],
  );
  return ids;
}

/** Which payload of insertPayloads a body is: its one event's assetId. */
export function bodyNumber(body: string): number {
  return (JSON.parse(body) as { events: Array<{ assetId: number }> }).events[0]!.assetId;
}
