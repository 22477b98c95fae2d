import type pg from 'pg';
import { batchBody, type Batch } from './pack.js';
import { Params, valuesColumns, type Column, type Statement } from '../db/columns.js';

/**
 * The payloads store: the one writer of payload rows, for coalescing and
 * backfill alike. A sealed batch becomes a `pending` payload with its body,
 * or, when its single event exceeds maxPayloadBytes (Batch.tooLarge), a
 * payload dead-lettered as too_large; a batch still open becomes an `open`
 * row without its events (see payloadGroups). Bodies are shared through
 * payloads.body_of.
 */

/** One payload row as written. */
interface PayloadRow {
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
 * valuesColumns): each body travels as a parameter of its own because, as an
 * element of one text[] literal, every quote of its JSON would be escaped
 * here and parsed again by PostgreSQL, at a cost above everything else the
 * statement does.
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
 * Payload rows per INSERT. Invariant: PAYLOADS_PER_STATEMENT times
 * PAYLOAD_COLUMNS.length, plus the parameters of the statement that carries
 * them (a coalescing chunk's events), stays below PostgreSQL's limit of
 * 65,535 bind parameters per statement (checked in test/payloads).
 */
export const PAYLOADS_PER_STATEMENT = 500;

/** The payload rows of one INSERT (see payloadGroups). */
export type PayloadGroup = Rows;

/**
 * The payload rows that write `batches`, in groups of one statement each,
 * built now: a batch that routing adds to later is written as it is at this
 * call. A sealed batch is written whole (body, count, eventIds). A batch
 * still open is written once, as an `open` row without its events, which is
 * never dispatched: its events name it (events.payload_ids), and it gets its
 * body when it is sealed, by a later chunk, the end of the run, or after a
 * crash by sealOpenPayloads. So a payload row is written at most twice
 * however many chunks fill it, rather than having its growing body rewritten
 * by every chunk that adds to it. Every batch must have its payload id. The
 * batches count as persisted from this call: the caller writes the rows
 * before any later call's.
 */
export function payloadGroups(batches: readonly Batch[], webhookTimestamp: string): PayloadGroup[] {
  const written = batches.filter((batch) => batch.sealed || !batch.persisted);
  const groups: PayloadGroup[] = [];
  // Batches sealed here with the same events in the same order (webhooks whose
  // filters agree) get the same timestamp, so the same bytes: the first
  // carries the body, the others name it (payloads.body_of). A too_large
  // payload neither shares its body nor lends it: it is never sent; nor does
  // a tailored one (Batch.tailored), whose events' bytes are its own.
  const bodies = new Map<string, { payloadId: number; bytes: number }>();
  for (let start = 0; start < written.length; start += PAYLOADS_PER_STATEMENT) {
    groups.push(
      written.slice(start, start + PAYLOADS_PER_STATEMENT).map((batch) => payloadRow(batch, webhookTimestamp, bodies)),
    );
  }
  for (const batch of written) batch.persisted = true;
  return groups;
}

function payloadRow(
  batch: Batch,
  webhookTimestamp: string,
  bodies: Map<string, { payloadId: number; bytes: number }>,
): PayloadRow {
  const row = {
    payloadId: batch.payloadId!,
    webhookId: batch.webhookId,
    tooLarge: batch.tooLarge,
  };
  if (!batch.sealed) {
    return { ...row, status: 'open', body: '', bodyOf: null, byteSize: 0, eventCount: 0, eventIds: '{}' };
  }
  const eventIds = `{${batch.eventIds.join(',')}}`;
  const sealed = {
    ...row,
    status: batch.tooLarge ? 'dead_lettered' : 'pending',
    eventCount: batch.events.length,
    eventIds,
  } as const;
  const own = batch.tooLarge || batch.tailored;
  const shared = own ? undefined : bodies.get(eventIds);
  if (shared) return { ...sealed, body: '', bodyOf: shared.payloadId, byteSize: shared.bytes };
  const body = batchBody(batch, webhookTimestamp);
  const bytes = Buffer.byteLength(body);
  if (!own) bodies.set(eventIds, { payloadId: row.payloadId, bytes });
  return { ...sealed, body, bodyOf: null, byteSize: bytes };
}

/**
 * The INSERT of one group of payload rows, its parameters added to
 * `params`. `runId` is the placeholder of the coalescing run that writes
 * them (null for a backfill's). A row written again (an open payload sealed)
 * takes the new status, body and events.
 */
export function payloadInsert(params: Params, runId: string, rows: PayloadGroup): string {
  return `insert into asset_webhooks.payloads
         (payload_id, webhook_id, run_id, status, body, body_of, byte_size, event_count, event_ids, dead_letter_reason, dead_lettered_at)
       overriding system value
       select b.payload_id, b.webhook_id, ${runId}, b.status, b.body, b.body_of, b.byte_size, b.event_count, b.event_ids,
              case when b.too_large then 'too_large' end, case when b.too_large then clock_timestamp() end
       from ${valuesColumns(params, PAYLOAD_COLUMNS, rows, rows.length, 'b')}
       on conflict (payload_id) do update
         set status = excluded.status, body = excluded.body, body_of = excluded.body_of, byte_size = excluded.byte_size,
             event_count = excluded.event_count, event_ids = excluded.event_ids`;
}

/** One group's INSERT as a statement of its own. */
export function payloadStatement(runId: number | null, rows: PayloadGroup): Statement {
  const params = new Params();
  const text = payloadInsert(params, params.add(runId, 'bigint'), rows);
  return { text, values: params.values };
}

/**
 * Writes `batches` (see payloadGroups), a statement per group, on `client`:
 * for a coalescing run (`runId`) where nothing routes meanwhile, and for a
 * backfill (null), whose batches are all sealed.
 */
export async function writePayloads(
  client: pg.PoolClient,
  runId: number | null,
  batches: readonly Batch[],
  webhookTimestamp: string,
): Promise<void> {
  for (const rows of payloadGroups(batches, webhookTimestamp)) {
    const { text, values } = payloadStatement(runId, rows);
    await client.query(text, values);
  }
}
