import type { SeenRow } from './seen-row.js';
import { listLiteral } from '../db/array-literal.js';
import { Params, unnestColumns, type Column } from '../db/columns.js';
import type { DecimalId } from '../interfaces.js';

/** The consumed events of one coalescing chunk, column by column (parallel arrays, one entry per event, in seq order). */
export interface ConsumedEvents {
  readonly seqs: readonly number[];
  /** As the claim read them (derived once there, see asset_webhooks.event_id_of). */
  readonly eventIds: readonly string[];
  readonly atomIds: ReadonlyArray<DecimalId | null>;
  /**
   * The asset's uuid where the outbox row has none (a binding may capture
   * none), else null: events.asset_uuid is the one the payloads carry.
   */
  readonly assetUuids: ReadonlyArray<string | null>;
  readonly collapsedInto: ReadonlyArray<string | null>;
  /** What routing saw of each event's asset (SeenValues.of). */
  readonly seen: readonly SeenRow[];
  /**
   * The routing positions of the webhooks that receive each event, and in the
   * same order the payloads that carry it to them; empty when none does
   * (stored as null, see listLiteral).
   */
  readonly deliveredTo: ReadonlyArray<readonly number[]>;
  readonly payloadIds: ReadonlyArray<readonly number[]>;
  /** The positions among deliveredTo that got the event as an UNMATCHED (mirror webhooks). */
  readonly unmatchedTo: ReadonlyArray<readonly number[]>;
  /** Excluded for every webhook as `in_trash` (ClaimedEvent.inTrash). */
  readonly inTrash: readonly boolean[];
  /**
   * The eventTimestamp given where it is not the event's own time (see
   * AssetClock), else null: events.occurred_at stores the eventTimestamp
   * as sent.
   */
  readonly raisedTimestamps: ReadonlyArray<string | null>;
}

/**
 * The events row's asset_gone and seen_ columns, read from the SeenRow that
 * `seenOf` gives for row `i`: every writer of events (coalescing, reconcile)
 * stores what routing saw the same way.
 */
export function seenColumns<Rows>(seenOf: (rows: Rows, i: number) => SeenRow): ReadonlyArray<Column<Rows>> {
  const seen =
    (read: (row: SeenRow) => string | boolean | null): Column<Rows>['value'] =>
    (rows, i) =>
      read(seenOf(rows, i));
  return [
    { name: 'asset_gone', type: 'boolean', value: seen((row) => row.asset_gone) },
    { name: 'seen_supertype', type: 'text', value: seen((row) => row.seen_supertype) },
    { name: 'seen_parent_id', type: 'bigint', value: seen((row) => row.seen_parent_id) },
    { name: 'seen_state', type: 'text', value: seen((row) => row.seen_state) },
    { name: 'seen_schema_id', type: 'bigint', value: seen((row) => row.seen_schema_id) },
    { name: 'seen_type_id', type: 'bigint', value: seen((row) => row.seen_type_id) },
    { name: 'seen_domain_id', type: 'bigint', value: seen((row) => row.seen_domain_id) },
    { name: 'seen_keywords', type: 'text', value: seen((row) => listLiteral(row.seen_keywords)) },
    { name: 'seen_field_names', type: 'text', value: seen((row) => listLiteral(row.seen_field_names)) },
    { name: 'seen_field_values', type: 'text', value: seen((row) => listLiteral(row.seen_field_values)) },
  ];
}

/**
 * The columns of a chunk's consumed events. An event's lists (its receivers,
 * what it saw of keywords and fields) go as the text of their own array
 * literals (listLiteral), cast row by row where they are read: a list of
 * lists cannot be one array, whose rows must all have one length.
 */
export const CONSUMED_COLUMNS: ReadonlyArray<Column<ConsumedEvents>> = [
  { name: 'seq', type: 'bigint', value: (events, i) => events.seqs[i]! },
  { name: 'event_id', type: 'uuid', value: (events, i) => events.eventIds[i]! },
  { name: 'atom_id', type: 'bigint', value: (events, i) => events.atomIds[i]! },
  { name: 'asset_uuid', type: 'uuid', value: (events, i) => events.assetUuids[i]! },
  { name: 'collapsed_into', type: 'uuid', value: (events, i) => events.collapsedInto[i]! },
  { name: 'delivered_to', type: 'text', value: (events, i) => listLiteral(events.deliveredTo[i]!) },
  { name: 'payload_ids', type: 'text', value: (events, i) => listLiteral(events.payloadIds[i]!) },
  { name: 'unmatched_to', type: 'text', value: (events, i) => listLiteral(events.unmatchedTo[i]!) },
  { name: 'in_trash', type: 'boolean', value: (events, i) => events.inTrash[i]! },
  { name: 'raised_at', type: 'timestamptz', value: (events, i) => events.raisedTimestamps[i]! },
  ...seenColumns<ConsumedEvents>((events, i) => events.seen[i]!),
];

/**
 * A W3C traceparent as events.traceparent keeps it (migration 0006): the
 * capture stores any value of its length, and the coalescer keeps only this
 * form, off the DAM's path. src/tracing/trace-context.ts reads the same form.
 */
const TRACEPARENT_FORM = '^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$';

/**
 * The CTEs `consumed` and `moved`, which move a chunk's events from the
 * outbox to asset_webhooks.events with their routes, their parameters added
 * to `params`; `runId` and `routingId` are placeholders already added.
 * `events` must not be empty.
 *
 * The seq range lets the planner walk the outbox's primary key: with `= any`
 * alone it would scan the whole outbox. The list is only a filter (`+ 0`),
 * hashed once: as an index condition as well it would cost a descent of the
 * primary key per row, and with statistics taken while the outbox was
 * smaller the planner would scan the whole outbox for every chunk. The
 * events' columns come as one array each (unnestColumns): unnest and
 * array_in cost PostgreSQL far less than json_to_recordset does for the same
 * rows, which builds a hash table for every object it reads.
 */
export function consumeCtes(params: Params, runId: string, routingId: string, events: ConsumedEvents): string {
  const n = events.seqs.length;
  const rows = unnestColumns(params, CONSUMED_COLUMNS, events, n, 'r');
  const seqs = rows.arrays.get('seq')!;
  return `consumed as (
       delete from asset_webhooks.outbox o
       where o.seq between ${params.add(events.seqs[0])} and ${params.add(events.seqs[n - 1])} and o.seq + 0 = any(${seqs})
       returning o.*
     ),
     moved as (
       insert into asset_webhooks.events
         (event_id, seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, run_id, coalesced_at, collapsed_into,
          routing_id, delivered_to, payload_ids, unmatched_to, in_trash, asset_gone, seen_supertype, seen_parent_id, seen_state, seen_schema_id, seen_type_id,
          seen_domain_id, seen_keywords, seen_field_names, seen_field_values, traceparent)
       select r.event_id, c.seq, coalesce(r.raised_at, c.occurred_at), c.event_type, c.asset_id, coalesce(c.asset_uuid, r.asset_uuid), r.atom_id, ${runId},
              (select asset_webhooks.now()), r.collapsed_into,
              ${routingId}, r.delivered_to::integer[], r.payload_ids::bigint[], r.unmatched_to::integer[], r.in_trash, r.asset_gone, r.seen_supertype, r.seen_parent_id, r.seen_state,
              r.seen_schema_id, r.seen_type_id, r.seen_domain_id, r.seen_keywords::text[], r.seen_field_names::text[],
              r.seen_field_values::text[], case when c.traceparent ~ '${TRACEPARENT_FORM}' then c.traceparent end
       from consumed c
       join ${rows.text}
         on r.seq = c.seq
     )`;
}
