import type pg from 'pg';
import type { DecimalId } from '../interfaces.js';
import { batchBody, type Batch } from './pack.js';

/**
 * Gives every batch that has no payload id yet one from the payloads' identity
 * sequence, so routes can name their payload before anything is written.
 */
export async function assignPayloadIds(client: pg.PoolClient, batches: readonly Batch[]): Promise<void> {
  const missing = batches.filter((batch) => batch.payloadId === null);
  if (missing.length === 0) return;
  const { rows } = await client.query<{ id: number }>(
    `select nextval(pg_get_serial_sequence('asset_webhooks.payloads', 'payload_id')) as id
     from generate_series(1, $1::int)`,
    [missing.length],
  );
  missing.forEach((batch, index) => {
    batch.payloadId = rows[index]!.id;
  });
}

/**
 * Writes the batches of one chunk: new ones inserted, batches continued from an
 * earlier chunk of the run updated. A sealed batch becomes `pending` (or, for
 * a single event over the size cap, dead-lettered as too_large); an unsealed
 * one stays `open` and is never dispatched.
 */
export async function upsertPayloads(client: pg.PoolClient, runId: number, batches: readonly Batch[], webhookTimestamp: string): Promise<void> {
  // Each body travels as a bind parameter of its own: packed into one text[]
  // array literal, every quote of the JSON would be escaped by the driver and
  // parsed again by PostgreSQL, which cost more than everything else here.
  for (let start = 0; start < batches.length; start += PAYLOADS_PER_STATEMENT) {
    const group = batches.slice(start, start + PAYLOADS_PER_STATEMENT);
    const values: unknown[] = [runId];
    const rows = group.map((batch) => {
      values.push(batch.payloadId, batch.webhookId, batch.tooLarge ? 'dead_lettered' : batch.sealed ? 'pending' : 'open',
        batchBody(batch, webhookTimestamp), batch.events.length, `{${batch.eventIds.join(',')}}`, batch.tooLarge);
      const n = values.length;
      return `($${n - 6}::bigint, $${n - 5}::text, $${n - 4}::text, $${n - 3}::text, $${n - 2}::int, $${n - 1}::uuid[], $${n}::boolean)`;
    });
    await client.query(
      `insert into asset_webhooks.payloads
         (payload_id, webhook_id, run_id, status, body, byte_size, event_count, event_ids, dead_letter_reason, dead_lettered_at)
       overriding system value
       select b.payload_id, b.webhook_id, $1, b.status, b.body, octet_length(b.body), b.event_count, b.event_ids,
              case when b.too_large then 'too_large' end, case when b.too_large then clock_timestamp() end
       from (values ${rows.join(', ')}) as b(payload_id, webhook_id, status, body, event_count, event_ids, too_large)
       on conflict (payload_id) do update
         set status = excluded.status, body = excluded.body, byte_size = excluded.byte_size,
             event_count = excluded.event_count, event_ids = excluded.event_ids`,
      values,
    );
  }
}

/** Payload rows per INSERT: 7 parameters each, well under PostgreSQL's 65,535. */
export const PAYLOADS_PER_STATEMENT = 500;

/** The consumed events of one chunk, column by column (parallel arrays, one entry per event, in seq order). */
export interface ConsumedEvents {
  readonly seqs: readonly number[];
  /** As the claim read them (derived once there, see asset_webhooks.event_id_of). */
  readonly eventIds: readonly string[];
  /** Decimal text, written into the JSON document as numbers: jsonb keeps their digits, and the bigint column gets them exactly. */
  readonly atomIds: ReadonlyArray<DecimalId | null>;
  readonly collapsedInto: ReadonlyArray<string | null>;
  /** JSON objects: webhook id to payload id (number) or reason (string). */
  readonly routes: readonly string[];
}

/**
 * Moves the claimed rows from the outbox to asset_webhooks.events with their
 * routes, in one statement. Runs in the chunk's transaction, after the claim.
 */
export async function consumeEvents(client: pg.PoolClient, runId: number, events: ConsumedEvents): Promise<void> {
  if (events.seqs.length === 0) return;
  // One JSON document rather than a text[] of JSON strings (see upsertPayloads).
  let document = '[';
  for (let i = 0; i < events.seqs.length; i += 1) {
    const collapsed = events.collapsedInto[i];
    document += `${i === 0 ? '' : ','}{"seq":${events.seqs[i]},"event_id":"${events.eventIds[i]}","atom_id":${events.atomIds[i] ?? 'null'},` +
      `"collapsed_into":${collapsed ? `"${collapsed}"` : 'null'},"routes":${events.routes[i]}}`;
  }
  document += ']';
  await client.query(
    `with consumed as (
       delete from asset_webhooks.outbox o
       -- Only the range is an index condition (see the note below the statement).
       where o.seq between $4 and $5 and o.seq + 0 = any($2::bigint[])
       returning o.*
     )
     insert into asset_webhooks.events
       (event_id, seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, run_id, coalesced_at, collapsed_into, routes)
     select r.event_id, c.seq, c.occurred_at, c.event_type, c.asset_id, c.asset_uuid, r.atom_id, $1,
            clock_timestamp(), r.collapsed_into, r.routes
     from consumed c
     join jsonb_to_recordset($3::jsonb) as r(seq bigint, event_id uuid, atom_id bigint, collapsed_into uuid, routes jsonb)
       on r.seq = c.seq`,
    // The range lets the planner walk the index: with `= any` alone it scanned
    // the whole outbox. The list is only a filter (`+ 0`), hashed once: as an
    // index condition as well, it cost a descent of the primary key per row
    // (PG15, a chunk of 2,000 in a backlog of 300,000: 6,028 buffers and 2.3 ms
    // against 36 and 0.5 ms), and with statistics taken while the outbox was
    // smaller the planner chose to scan the whole outbox for every chunk (45
    // scans reading 2.7 million rows to coalesce 100,000 events).
    [runId, events.seqs, document, events.seqs[0], events.seqs[events.seqs.length - 1]],
  );
}
