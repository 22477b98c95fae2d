import type pg from 'pg';
import { batchBody, type Batch } from '../coalesce/pack.js';
import type { RoutedWebhook } from '../coalesce/route.js';
import { recordRouting } from '../coalesce/routing.js';

/** One backfilled event, as written to asset_webhooks.events. */
export interface BackfillEvent {
  readonly eventId: string;
  /** When the backfill read the asset's state: the event's eventTimestamp, ISO-8601 UTC with milliseconds. */
  readonly occurredAt: string;
  /** Decimal string: asset ids may exceed 2^53. */
  readonly assetId: string;
  readonly assetUuid: string;
  /** Decimal string, as assetId. */
  readonly atomId: string | null;
  /** The batch that carries it; its payloadId is assigned before the events are written. */
  readonly batch: Batch;
}

/** Payload rows per INSERT: 6 parameters each. */
const PAYLOADS_PER_STATEMENT = 500;

/**
 * Writes a chunk's payloads, every one sealed: pending, or dead-lettered as
 * too_large when its single event exceeds maxPayloadBytes (as coalescing does).
 * They carry no coalescing run.
 */
export async function insertBackfillPayloads(
  client: pg.PoolClient,
  batches: readonly Batch[],
  webhookTimestamp: string,
): Promise<void> {
  for (let start = 0; start < batches.length; start += PAYLOADS_PER_STATEMENT) {
    const group = batches.slice(start, start + PAYLOADS_PER_STATEMENT);
    const values: unknown[] = [];
    const rows = group.map((batch) => {
      // Each body is a parameter of its own, not an element of a text[]: see upsertPayloads (src/coalesce/persist.ts).
      values.push(
        batch.payloadId,
        batch.webhookId,
        batchBody(batch, webhookTimestamp),
        batch.events.length,
        `{${batch.eventIds.join(',')}}`,
        batch.tooLarge,
      );
      const n = values.length;
      return `($${n - 5}::bigint, $${n - 4}::text, $${n - 3}::text, $${n - 2}::int, $${n - 1}::uuid[], $${n}::boolean)`;
    });
    await client.query(
      `insert into asset_webhooks.payloads
         (payload_id, webhook_id, status, body, byte_size, event_count, event_ids, dead_letter_reason, dead_lettered_at)
       overriding system value
       select b.payload_id, b.webhook_id, case when b.too_large then 'dead_lettered' else 'pending' end, b.body, octet_length(b.body),
              b.event_count, b.event_ids, case when b.too_large then 'too_large' end, case when b.too_large then clock_timestamp() end
       from (values ${rows.join(', ')}) as b(payload_id, webhook_id, body, event_count, event_ids, too_large)`,
      values,
    );
  }
}

/**
 * Records a chunk's events in asset_webhooks.events, marked with their
 * backfill, so trace and event_outcomes show them as backfilled. Their routing
 * is one holding only the backfill's webhook (recorded once, reused as
 * coalescing reuses its configuration's): event_outcomes then shows each
 * event for that webhook alone, delivered to it in its payload.
 */
export async function insertBackfillEvents(
  client: pg.PoolClient,
  backfillId: number,
  webhook: RoutedWebhook,
  events: readonly BackfillEvent[],
): Promise<void> {
  if (events.length === 0) return;
  const routingId = await recordRouting(client, [webhook]);
  await client.query(
    `insert into asset_webhooks.events
       (event_id, occurred_at, event_type, asset_id, asset_uuid, atom_id, coalesced_at, routing_id, delivered_to, payload_ids, backfill_id)
     select e.event_id, e.occurred_at, 'EDITED', e.asset_id, e.asset_uuid, e.atom_id, clock_timestamp(), $2, '{1}', array[e.payload_id], $1
     from unnest($3::uuid[], $4::timestamptz[], $5::bigint[], $6::uuid[], $7::bigint[], $8::bigint[])
          as e(event_id, occurred_at, asset_id, asset_uuid, atom_id, payload_id)`,
    [
      backfillId,
      routingId,
      events.map((e) => e.eventId),
      events.map((e) => e.occurredAt),
      events.map((e) => e.assetId),
      events.map((e) => e.assetUuid),
      events.map((e) => e.atomId),
      events.map((e) => e.batch.payloadId),
    ],
  );
  // Its last use after the events' coalesced_at, as a coalescing chunk sets it: retention keeps it while they stay.
  await client.query('update asset_webhooks.routings set last_used_at = clock_timestamp() where routing_id = $1', [
    routingId,
  ]);
}
