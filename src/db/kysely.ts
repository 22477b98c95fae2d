import { Kysely, PostgresDialect, sql, type AliasedRawBuilder } from 'kysely';
import type pg from 'pg';
import type { DecimalId } from '../interfaces.js';

/**
 * The tables and views of schema asset_webhooks that the operator commands
 * read, typed for kysely. Writes on hot paths use plain SQL (bulk unnest).
 *
 * Ids of the asset schema (asset_id, atom_id, parent_id) are typed as the
 * decimal text that `asIdText` selects: read plainly, a value beyond 2^53 is
 * refused by the bigint parser (src/db/connect.ts). Never selectAll() a table
 * that has one.
 */
export interface OperatorDatabase {
  /** The outbox with each row's eventId (derived from seq and occurred_at unless a binding stored one). */
  'asset_webhooks.waiting_events': {
    seq: number;
    event_id: string;
    occurred_at: Date;
    event_type: string;
    asset_id: DecimalId;
    asset_uuid: string | null;
    atom_id: DecimalId | null;
    supertype: string | null;
    parent_id: DecimalId | null;
  };
  'asset_webhooks.events': {
    event_id: string;
    seq: number | null;
    occurred_at: Date;
    event_type: string;
    asset_id: DecimalId;
    asset_uuid: string | null;
    atom_id: DecimalId | null;
    run_id: number | null;
    coalesced_at: Date;
    collapsed_into: string | null;
    routing_id: number | null;
    delivered_to: number[] | null;
    payload_ids: number[] | null;
    asset_gone: boolean;
    /** An EDITED or REVERSION of an asset in the Trash, excluded for every webhook as `in_trash`. */
    in_trash: boolean;
    /** The backfill that wrote the event; null (with seq and run_id set) for a captured event. */
    backfill_id: number | null;
    reconcile_id: number | null;
    /** The W3C traceparent the capturing transaction set (asset_webhooks.traceparent), if valid; else null. */
    traceparent: string | null;
  };
  'asset_webhooks.event_outcomes': {
    event_id: string;
    event_type: string;
    asset_id: DecimalId;
    asset_uuid: string | null;
    occurred_at: Date;
    webhook_id: string;
    outcome: 'excluded' | 'collapsed' | 'pending' | 'delivered' | 'dead_lettered';
    excluded_by: string | null;
    payload_id: number | null;
    collapsed_into: string | null;
    atom_id: DecimalId | null;
    coalesced_at: Date;
    backfill_id: number | null;
    /** The type the webhook got the event as: its own, or UNMATCHED (mirror webhooks); null when not sent. */
    sent_as: string | null;
    reconcile_id: number | null;
  };
  'asset_webhooks.payloads': {
    payload_id: number;
    webhook_id: string;
    created_at: Date;
    status: string;
    event_count: number;
    event_ids: string[];
    series: number;
    series_started_at: Date;
    /** Finished attempts of the series: the one in flight is counted by its result. */
    attempts: number;
    last_attempt_at: Date | null;
    last_status_code: number | null;
    last_error: string | null;
    delivered_at: Date | null;
    dead_lettered_at: Date | null;
    dead_letter_reason: string | null;
    byte_size: number;
  };
  /** A payload's slot, from its claim to its final outcome (sql/migrations/0009_in_flight.sql). */
  'asset_webhooks.in_flight': {
    payload_id: number;
    webhook_id: string;
    series: number;
    attempt_no: number;
    started_at: Date;
    process_id: string | null;
    sent: boolean;
    /** Set while the payload holds its slot waiting for its retry. */
    next_attempt_at: Date | null;
  };
  /** A view: the attempt log and the attempts in flight. */
  'asset_webhooks.attempts': {
    payload_id: number;
    series: number;
    attempt_no: number;
    started_at: Date;
    duration_ms: number | null;
    status_code: number | null;
    error_class: string | null;
    error_message: string | null;
    response_excerpt: string | null;
    outcome: string | null;
    process_id: string | null;
    sent: boolean;
  };
  'asset_webhooks.redeliveries': {
    payload_id: number;
    series: number;
    requested_at: Date;
    requested_by: string;
    previous_reason: string | null;
    /** The webhook the payload belonged to before a redelivery that moved it (`--to`); null when it stayed. */
    moved_from: string | null;
    /** The replay that started this series (asset_webhooks.replays); null for a redelivery of a dead letter. */
    replay_id: number | null;
  };
  'asset_webhooks.dead_letters': {
    payload_id: number;
    webhook_id: string;
    reason: string;
    attempts: number;
    last_status_code: number | null;
    last_error: string | null;
    event_count: number;
    event_ids: string[];
    created_at: Date;
    last_attempt_at: Date | null;
    dead_lettered_at: Date;
    series: number;
    byte_size: number;
  };
}

/** A kysely instance over an existing pool; destroy() is not called (the pool's owner ends it). */
export function operatorDb(pool: pg.Pool): Kysely<OperatorDatabase> {
  return new Kysely<OperatorDatabase>({ dialect: new PostgresDialect({ pool }) });
}

/** `<column>::text as <column>`: an id of the asset schema, exact (see OperatorDatabase); `T` says whether it may be null. */
export function asIdText<C extends 'asset_id' | 'atom_id' | 'parent_id', T extends DecimalId | null = DecimalId>(
  column: C,
): AliasedRawBuilder<T, C> {
  return sql<T>`${sql.ref(column)}::text`.as(column);
}
