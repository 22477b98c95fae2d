import type pg from 'pg';
import type { RoutedWebhook } from '../coalesce/route.js';
import { recordRouting } from '../coalesce/routing.js';
import type { SeenRow } from '../coalesce/seen.js';
import { Params, unnestColumns, type Column } from '../db/columns.js';
import { seenColumns } from '../payloads/events.js';
import type { DecimalId } from '../interfaces.js';

/** One event a reconcile sends, as asset_webhooks.events stores it. */
export interface ReconcileEvent {
  readonly eventId: string;
  readonly eventType: 'EDITED' | 'UNMATCHED';
  /** The eventTimestamp it was sent with. */
  readonly occurredAt: string;
  readonly assetId: DecimalId;
  readonly assetUuid: string | null;
  readonly atomId: DecimalId | null;
  /** What the reconcile saw of the asset (excluded_by of an UNMATCHED is derived from it). */
  readonly seen: SeenRow;
  readonly json: string;
  /** Assigned before the events are written. */
  payloadId: number | null;
}

const COLUMNS: ReadonlyArray<Column<readonly ReconcileEvent[]>> = [
  { name: 'event_id', type: 'uuid', value: (events, i) => events[i]!.eventId },
  { name: 'event_type', type: 'text', value: (events, i) => events[i]!.eventType },
  { name: 'occurred_at', type: 'timestamptz', value: (events, i) => events[i]!.occurredAt },
  { name: 'asset_id', type: 'bigint', value: (events, i) => events[i]!.assetId },
  { name: 'asset_uuid', type: 'uuid', value: (events, i) => events[i]!.assetUuid },
  { name: 'atom_id', type: 'bigint', value: (events, i) => events[i]!.atomId },
  { name: 'payload_id', type: 'bigint', value: (events, i) => events[i]!.payloadId },
  ...seenColumns<readonly ReconcileEvent[]>((events, i) => events[i]!.seen),
];

/**
 * Records a reconcile chunk's events in asset_webhooks.events, marked with
 * their reconcile, each delivered to the reconcile's one webhook (a routing
 * of that webhook alone, as a backfill's), with what the reconcile saw of the
 * asset, so that event_outcomes names the check an UNMATCHED failed.
 */
export async function insertReconcileEvents(
  client: pg.PoolClient,
  reconcileId: number,
  webhook: RoutedWebhook,
  events: readonly ReconcileEvent[],
): Promise<void> {
  if (events.length === 0) return;
  const routingId = await recordRouting(client, [webhook]);
  const params = new Params();
  const reconcile = params.add(reconcileId);
  const routing = params.add(routingId);
  const rows = unnestColumns(params, COLUMNS, events, events.length, 'e');
  await client.query(
    `insert into asset_webhooks.events
       (event_id, occurred_at, event_type, asset_id, asset_uuid, atom_id, coalesced_at, routing_id, delivered_to, payload_ids,
        reconcile_id, asset_gone, seen_supertype, seen_parent_id, seen_state, seen_schema_id, seen_type_id, seen_domain_id,
        seen_keywords, seen_field_names, seen_field_values)
     select e.event_id, e.occurred_at, e.event_type, e.asset_id, e.asset_uuid, e.atom_id, (select asset_webhooks.now()), ${routing}, '{1}',
            array[e.payload_id], ${reconcile}, e.asset_gone, e.seen_supertype, e.seen_parent_id, e.seen_state, e.seen_schema_id,
            e.seen_type_id, e.seen_domain_id, e.seen_keywords::text[], e.seen_field_names::text[], e.seen_field_values::text[]
     from ${rows.text}`,
    params.values,
  );
  // Retention keeps a routing while events of it stay (see insertBackfillEvents).
  await client.query('update asset_webhooks.routings set last_used_at = asset_webhooks.now() where routing_id = $1', [
    routingId,
  ]);
}
