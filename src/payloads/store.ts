import type pg from 'pg';
import { batchBody, type Batch } from './pack.js';
import { payloadStatement, type PayloadRow } from '../lifecycle/payload-rows.js';

export { PAYLOAD_COLUMNS, payloadInsert, payloadStatement } from '../lifecycle/payload-rows.js';

/**
 * The payloads store: what the payload rows of coalescing and backfill hold.
 * A sealed batch becomes a `pending` payload with its body, or, when its
 * single event exceeds maxPayloadBytes (Batch.tooLarge), a payload
 * dead-lettered as too_large; a batch still open becomes an `open` row
 * without its events (see payloadGroups). Bodies are shared through
 * payloads.body_of. The rows are written by the lifecycle module
 * (src/lifecycle/payload-rows.ts), the one writer of a payload's state.
 */

type Rows = readonly PayloadRow[];

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
