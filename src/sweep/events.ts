import type pg from 'pg';
import type { Batch } from '../payloads/pack.js';
import type { RoutedWebhook } from '../coalesce/routed-webhooks.js';
import { recordRouting } from '../payloads/routing.js';
import { NOTHING_SEEN, type SeenRow } from '../payloads/seen-row.js';
import { Params, unnestColumns, type Column } from '../db/columns.js';
import type { DecimalId } from '../interfaces.js';
import { seenColumns } from '../payloads/events.js';
import type { SweepKind } from './lock.js';

/** One event a sweep sends, as asset_webhooks.events stores it. */
export interface SweptEvent {
  readonly eventId: string;
  readonly eventType: 'EDITED' | 'UNMATCHED';
  /** The eventTimestamp it was sent with, ISO-8601 UTC with milliseconds. */
  readonly occurredAt: string;
  readonly assetId: DecimalId;
  readonly assetUuid: string | null;
  readonly atomId: DecimalId | null;
  /** What the sweep saw of the asset (excluded_by of an UNMATCHED is derived from it); null: nothing recorded. */
  readonly seen: SeenRow | null;
  /** An UNMATCHED sent because the asset is in the Trash: event_outcomes names `in_trash` as its cause. */
  readonly inTrash?: boolean;
  /** The batch that carries it; its payloadId is assigned before the events are written. */
  readonly batch: Batch;
}

const COLUMNS: ReadonlyArray<Column<readonly SweptEvent[]>> = [
  { name: 'event_id', type: 'uuid', value: (events, i) => events[i]!.eventId },
  { name: 'event_type', type: 'text', value: (events, i) => events[i]!.eventType },
  { name: 'occurred_at', type: 'timestamptz', value: (events, i) => events[i]!.occurredAt },
  { name: 'asset_id', type: 'bigint', value: (events, i) => events[i]!.assetId },
  { name: 'asset_uuid', type: 'uuid', value: (events, i) => events[i]!.assetUuid },
  { name: 'atom_id', type: 'bigint', value: (events, i) => events[i]!.atomId },
  { name: 'payload_id', type: 'bigint', value: (events, i) => events[i]!.batch.payloadId },
  { name: 'in_trash', type: 'boolean', value: (events, i) => events[i]!.inTrash === true },
  ...seenColumns<readonly SweptEvent[]>((events, i) => events[i]!.seen ?? NOTHING_SEEN),
];

/**
 * Records a chunk's events in asset_webhooks.events, marked with their sweep
 * (backfill_id or reconcile_id), so that trace and event_outcomes show how
 * they were sent. Their routing holds only the sweep's webhook (recorded
 * once, reused as coalescing reuses its configuration's): event_outcomes
 * shows each event for that webhook alone, delivered to it in its payload.
 */
export async function insertSweptEvents(
  client: pg.PoolClient,
  sweep: { readonly kind: SweepKind; readonly id: number },
  webhook: RoutedWebhook,
  events: readonly SweptEvent[],
): Promise<void> {
  if (events.length === 0) return;
  const routingId = await recordRouting(client, [webhook]);
  const params = new Params();
  const sweepId = params.add(sweep.id);
  const routing = params.add(routingId);
  const rows = unnestColumns(params, COLUMNS, events, events.length, 'e');
  await client.query(
    `insert into asset_webhooks.events
       (event_id, occurred_at, event_type, asset_id, asset_uuid, atom_id, in_trash, coalesced_at, routing_id, delivered_to, payload_ids,
        ${sweep.kind}_id, asset_gone, seen_supertype, seen_parent_id, seen_state, seen_schema_id, seen_type_id, seen_domain_id,
        seen_keywords, seen_field_names, seen_field_values)
     select e.event_id, e.occurred_at, e.event_type, e.asset_id, e.asset_uuid, e.atom_id, e.in_trash, (select asset_webhooks.now()), ${routing}, '{1}',
            array[e.payload_id], ${sweepId}, e.asset_gone, e.seen_supertype, e.seen_parent_id, e.seen_state, e.seen_schema_id,
            e.seen_type_id, e.seen_domain_id, e.seen_keywords::text[], e.seen_field_names::text[], e.seen_field_values::text[]
     from ${rows.text}`,
    params.values,
  );
  // Its last use after the events' coalesced_at, as a coalescing chunk sets it: retention keeps it while they stay.
  await client.query('update asset_webhooks.routings set last_used_at = asset_webhooks.now() where routing_id = $1', [
    routingId,
  ]);
}
