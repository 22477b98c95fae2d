import type pg from 'pg';
import { Params, unnestColumns, valuesColumns, type Column, type Statement } from '../db/columns.js';

/**
 * A payload's first states, part of the lifecycle module
 * (docs/payload-lifecycle.md): the rows a coalescing run or a backfill writes
 * (`open`, `pending`, or dead-lettered as too_large), and the seal of a payload
 * a crashed run left `open`. Their times are the one clock's
 * (asset_webhooks.now()), read once per statement: created_at, the series'
 * start and a too_large payload's dead_lettered_at are the same instant.
 */

/** One payload row as written. */
export interface PayloadRow {
  readonly payloadId: number;
  readonly webhookId: string;
  readonly status: 'open' | 'pending' | 'dead_lettered';
  /** Empty while open, and when bodyOf names the payload holding the same bytes. */
  readonly body: string;
  readonly bodyOf: number | null;
  readonly byteSize: number;
  readonly eventCount: number;
  /** An array literal of the event ids. */
  readonly eventIds: string;
  readonly tooLarge: boolean;
}

type Rows = readonly PayloadRow[];

/**
 * The columns of the payload rows, one bind parameter per value (see
 * valuesColumns) rather than an array per column: each body travels as a
 * parameter of its own because, as an element of one text[] literal, every
 * quote of its JSON would be escaped here and parsed again by PostgreSQL, at a
 * cost above everything else the statement does.
 */
export const PAYLOAD_COLUMNS: ReadonlyArray<Column<Rows>> = [
  { name: 'payload_id', type: 'bigint', value: (rows, i) => rows[i]!.payloadId },
  { name: 'webhook_id', type: 'text', value: (rows, i) => rows[i]!.webhookId },
  { name: 'status', type: 'text', value: (rows, i) => rows[i]!.status },
  { name: 'body', type: 'text', value: (rows, i) => rows[i]!.body },
  { name: 'body_of', type: 'bigint', value: (rows, i) => rows[i]!.bodyOf },
  { name: 'byte_size', type: 'int', value: (rows, i) => rows[i]!.byteSize },
  { name: 'event_count', type: 'int', value: (rows, i) => rows[i]!.eventCount },
  { name: 'event_ids', type: 'uuid[]', value: (rows, i) => rows[i]!.eventIds },
  { name: 'too_large', type: 'boolean', value: (rows, i) => rows[i]!.tooLarge },
];

/**
 * The INSERT of a group of payload rows, its parameters added to `params`.
 * `runId` is the placeholder of the coalescing run that writes them (null for
 * a backfill's). A row written again (an open payload sealed) takes the new
 * status, body and events, and keeps its times.
 */
export function payloadInsert(params: Params, runId: string, rows: Rows): string {
  return `insert into asset_webhooks.payloads
         (payload_id, webhook_id, run_id, status, body, body_of, byte_size, event_count, event_ids, dead_letter_reason,
          dead_lettered_at, created_at, series_started_at)
       overriding system value
       select b.payload_id, b.webhook_id, ${runId}, b.status, b.body, b.body_of, b.byte_size, b.event_count, b.event_ids,
              case when b.too_large then 'too_large' end, case when b.too_large then c.now end, c.now, c.now
       from (select asset_webhooks.now() as now) c, ${valuesColumns(params, PAYLOAD_COLUMNS, rows, rows.length, 'b')}
       on conflict (payload_id) do update
         set status = excluded.status, body = excluded.body, body_of = excluded.body_of, byte_size = excluded.byte_size,
             event_count = excluded.event_count, event_ids = excluded.event_ids`;
}

/** One group's INSERT as a statement of its own. */
export function payloadStatement(runId: number | null, rows: Rows): Statement {
  const params = new Params();
  const text = payloadInsert(params, params.add(runId, 'bigint'), rows);
  return { text, values: params.values };
}

/** An open payload's contents at its seal. */
export interface SealedPayload {
  readonly payloadId: number;
  readonly body: string;
  /** An array literal of the event ids. */
  readonly eventIds: string;
  readonly eventCount: number;
}

const SEALED_COLUMNS: ReadonlyArray<Column<readonly SealedPayload[]>> = [
  { name: 'payload_id', type: 'bigint', value: (rows, i) => rows[i]!.payloadId },
  { name: 'body', type: 'text', value: (rows, i) => rows[i]!.body },
  // Event ids as text: a uuid[] per payload cannot be an element of one array.
  { name: 'event_ids', type: 'text', value: (rows, i) => rows[i]!.eventIds },
  { name: 'event_count', type: 'int', value: (rows, i) => rows[i]!.eventCount },
];

/**
 * Seals open payloads, open -> waiting, in one statement over arrays. A
 * payload no longer open (sealed by its own run meanwhile) is left as it is.
 */
export async function sealPayloads(client: pg.Pool | pg.ClientBase, sealed: readonly SealedPayload[]): Promise<void> {
  if (sealed.length === 0) return;
  const params = new Params();
  const { text } = unnestColumns(params, SEALED_COLUMNS, sealed, sealed.length, 's');
  await client.query(
    `update asset_webhooks.payloads p
     set status = 'pending', body = s.body, byte_size = octet_length(s.body), event_count = s.event_count,
         event_ids = s.event_ids::uuid[]
     from ${text}
     where p.payload_id = s.payload_id and p.status = 'open'`,
    params.values,
  );
}
