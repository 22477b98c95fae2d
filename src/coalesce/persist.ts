import type pg from 'pg';
import type { DecimalId, EventType } from '../interfaces.js';
import { serializeBody, serializeEvent } from '../payload/serialize.js';
import { arrayLiteral, listLiteral } from '../db/array-literal.js';
import { batchBody, type Batch } from './pack.js';
import type { SeenRow } from './seen.js';

/** One statement, ready to run: built at once, so that later routing cannot change what it writes. */
export interface Statement {
  readonly text: string;
  readonly values: unknown[];
}

/**
 * Gives every batch that has no payload id yet one from the payloads' identity
 * sequence, so routes can name their payload before anything is written.
 */
export async function assignPayloadIds(client: pg.PoolClient, batches: readonly Batch[]): Promise<void> {
  const missing = batches.filter((batch) => batch.payloadId === null);
  if (missing.length > 0) assignIds(missing, await nextPayloadIds(client, missing.length));
}

/** Gives `batches` the first of `ids`, in order. */
function assignIds(batches: readonly Batch[], ids: readonly number[]): void {
  batches.forEach((batch, index) => {
    batch.payloadId = ids[index]!;
  });
}

async function nextPayloadIds(client: pg.PoolClient, count: number): Promise<number[]> {
  const { rows } = await client.query<{ id: number }>(
    `select nextval(pg_get_serial_sequence('asset_webhooks.payloads', 'payload_id')) as id
     from generate_series(1, $1::int)`,
    [count],
  );
  return rows.map((row) => row.id);
}

/**
 * Payload ids taken from the sequence ahead of need, a block at a time, so
 * that a coalescing run names its payloads without a statement per chunk. Ids
 * taken and never used leave gaps, as any rolled-back nextval does. The ids
 * of one run still rise in the order it writes its payloads; a backfill
 * writing meanwhile draws ids of its own, and the two interleave, each in
 * order within itself (see backfill).
 */
export class PayloadIdBlock {
  private ids: number[] = [];

  /** `client` draws the blocks: the run's session, so that a run needs no connection beyond its two. */
  constructor(
    private readonly client: pg.PoolClient,
    private readonly blockSize = 1024,
  ) {}

  /** As assignPayloadIds, from the block; fetches another block only when this one runs out. */
  async assign(batches: readonly Batch[]): Promise<void> {
    const missing = batches.filter((batch) => batch.payloadId === null);
    if (missing.length > this.ids.length)
      this.ids.push(...(await nextPayloadIds(this.client, Math.max(this.blockSize, missing.length - this.ids.length))));
    assignIds(missing, this.ids.splice(0, missing.length));
  }
}

/**
 * Writes the batches of one chunk (see payloadInserts). Used where nothing
 * routes meanwhile: a coalescing chunk's statements are built before its write.
 */
export async function upsertPayloads(
  client: pg.PoolClient,
  runId: number,
  batches: readonly Batch[],
  webhookTimestamp: string,
): Promise<void> {
  for (const rows of payloadInserts(batches, webhookTimestamp)) {
    const { text, values } = payloadStatement(runId, rows);
    await client.query(text, values);
  }
}

/** One INSERT of payload rows as a statement of its own. */
function payloadStatement(runId: number, rows: PayloadInsert): Statement {
  const { text, values } = renderPayloadInsert(rows, 2);
  return { text, values: [runId, ...values] };
}

/** The rows of one INSERT into payloads: 9 bind parameters each (see renderPayloadInsert). */
type PayloadInsert = unknown[][];

/**
 * The payload rows that write the batches of one chunk, in groups of one
 * statement each, built now: a batch routing adds to later is written as it
 * is at this call. A sealed batch is written whole (body, count, eventIds) and
 * becomes `pending` (or, for a single event over the size cap, dead-lettered
 * as too_large). A batch still open is written once, as an `open` row without
 * its events, which is never dispatched: its events name it
 * (events.payload_ids), and it gets its body when it is sealed, by a later
 * chunk, the end of the run, or after a crash by sealOpenPayloads. So a
 * payload row is written at most twice, however many chunks fill it: writing
 * an open payload's growing body at every chunk cost, with many webhooks each
 * receiving a few events per chunk, a rewrite of every body per chunk. Every
 * batch must have its payload id. The batches count as persisted from this
 * call: the caller writes the rows before any later chunk's.
 */
function payloadInserts(batches: readonly Batch[], webhookTimestamp: string): PayloadInsert[] {
  const written = batches.filter((batch) => batch.sealed || !batch.persisted);
  const inserts: PayloadInsert[] = [];
  // Batches sealed here with the same events in the same order (webhooks whose
  // filters agree) get the same timestamp, so the same bytes: the first
  // carries the body, the others name it (payloads.body_of).
  const bodies = new Map<string, { payloadId: number; bytes: number }>();
  for (let start = 0; start < written.length; start += PAYLOADS_PER_STATEMENT) {
    const group = written.slice(start, start + PAYLOADS_PER_STATEMENT);
    inserts.push(
      group.map((batch) => {
        const eventIds = batch.sealed ? `{${batch.eventIds.join(',')}}` : '{}';
        let body = '';
        let bodyOf: number | null = null;
        let bytes = 0;
        if (batch.sealed) {
          const shared = batch.tooLarge ? undefined : bodies.get(eventIds);
          if (shared) {
            bodyOf = shared.payloadId;
            bytes = shared.bytes;
          } else {
            body = batchBody(batch, webhookTimestamp);
            bytes = Buffer.byteLength(body);
            if (!batch.tooLarge) bodies.set(eventIds, { payloadId: batch.payloadId!, bytes });
          }
        }
        return [
          batch.payloadId,
          batch.webhookId,
          batch.tooLarge ? 'dead_lettered' : batch.sealed ? 'pending' : 'open',
          body,
          bodyOf,
          bytes,
          batch.sealed ? batch.events.length : 0,
          eventIds,
          batch.tooLarge,
        ];
      }),
    );
  }
  for (const batch of written) batch.persisted = true;
  return inserts;
}

/**
 * One INSERT of payload rows, its parameters numbered from `first`; the run's
 * id is `$1`. Each body travels as a bind parameter of its own: packed into
 * one text[] array literal, every quote of the JSON would be escaped by the
 * driver and parsed again by PostgreSQL, which cost more than everything else
 * here.
 */
function renderPayloadInsert(rows: PayloadInsert, first: number): Statement {
  const values: unknown[] = [];
  const tuples = rows.map((row) => {
    const n = first + values.length;
    values.push(...row);
    return `($${n}::bigint, $${n + 1}::text, $${n + 2}::text, $${n + 3}::text, $${n + 4}::bigint, $${n + 5}::int, $${n + 6}::int, $${n + 7}::uuid[], $${n + 8}::boolean)`;
  });
  return {
    text: `insert into asset_webhooks.payloads
         (payload_id, webhook_id, run_id, status, body, body_of, byte_size, event_count, event_ids, dead_letter_reason, dead_lettered_at)
       overriding system value
       select b.payload_id, b.webhook_id, $1, b.status, b.body, b.body_of, b.byte_size, b.event_count, b.event_ids,
              case when b.too_large then 'too_large' end, case when b.too_large then clock_timestamp() end
       from (values ${tuples.join(', ')}) as b(payload_id, webhook_id, status, body, body_of, byte_size, event_count, event_ids, too_large)
       on conflict (payload_id) do update
         set status = excluded.status, body = excluded.body, body_of = excluded.body_of, byte_size = excluded.byte_size,
             event_count = excluded.event_count, event_ids = excluded.event_ids`,
    values,
  };
}

/**
 * Seals the payloads a crashed run left `open`: each gets the body of the
 * events that name it (written in the same transactions as the payload row),
 * in order of capture, serialized as the run would have, with the time of
 * sealing as its webhookTimestamp. Returns the webhooks of the sealed payloads.
 */
export async function sealOpenPayloads(
  client: pg.Pool | pg.PoolClient,
  webhookTimestamp: () => string,
): Promise<string[]> {
  const { rows: open } = await client.query<{ payload_id: number; webhook_id: string; since: Date | null }>(
    `select p.payload_id, p.webhook_id, r.started_at as since
     from asset_webhooks.payloads p left join asset_webhooks.coalesce_runs r on r.run_id = p.run_id
     where p.status = 'open'`,
  );
  if (open.length === 0) return [];
  const ids = open.map((row) => row.payload_id);
  const since = open.some((row) => row.since === null)
    ? null
    : new Date(Math.min(...open.map((row) => row.since!.getTime())));
  // A run's events were coalesced after it started: the index on coalesced_at bounds the search.
  const { rows: events } = await client.query<{
    payload_ids: Array<number | string>;
    event_id: string;
    event_timestamp: string;
    atom_id: DecimalId | null;
    asset_id: DecimalId;
    asset_uuid: string | null;
    event_type: EventType;
  }>(
    `select e.payload_ids, e.event_id,
            to_char(e.occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as event_timestamp,
            e.atom_id::text as atom_id, e.asset_id::text as asset_id, e.asset_uuid, e.event_type
     from asset_webhooks.events e
     where e.coalesced_at >= coalesce($2::timestamptz, '-infinity') and e.payload_ids && $1::bigint[]
     order by e.seq`,
    [ids, since],
  );
  const sealedAt = webhookTimestamp();
  // Keyed by the id's decimal string: bigint[] elements come back as strings.
  const members = new Map<string, { json: string[]; ids: string[] }>(
    ids.map((id) => [String(id), { json: [], ids: [] }]),
  );
  for (const event of events) {
    const json = serializeEvent({
      atomId: event.atom_id,
      eventId: event.event_id,
      eventTimestamp: event.event_timestamp,
      assetId: event.asset_id,
      assetUuid: event.asset_uuid ?? '',
      eventType: event.event_type,
    });
    for (const id of event.payload_ids) {
      const member = members.get(String(id));
      if (member) {
        member.json.push(json);
        member.ids.push(event.event_id);
      }
    }
  }
  for (const [id, member] of members) {
    await client.query(
      `update asset_webhooks.payloads
       set status = 'pending', body = $2, byte_size = octet_length($2), event_count = $3, event_ids = $4::uuid[]
       where payload_id = $1 and status = 'open'`,
      [id, serializeBody(member.json, sealedAt), member.ids.length, member.ids],
    );
  }
  return open.map((row) => row.webhook_id);
}

/** Payload rows per INSERT: 9 parameters each, well under PostgreSQL's 65,535. */
export const PAYLOADS_PER_STATEMENT = 500;

/** The consumed events of one chunk, column by column (parallel arrays, one entry per event, in seq order). */
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
}

/**
 * The CTEs `consumed` and `moved`, which move the events from the outbox to
 * asset_webhooks.events: $1 the run, $2 the seqs, $3 and $4 the first and
 * last seq, $5 the routing, $7-$22 the events' columns (consumeValues).
 *
 * The range lets the planner walk the index: with `= any` alone it scanned
 * the whole outbox. The list is only a filter (`+ 0`), hashed once: as an
 * index condition as well, it costs a descent of the primary key per row,
 * and with statistics taken while the outbox was smaller the planner would
 * scan the whole outbox for every chunk. The events' columns come as one
 * array each (arrayLiteral), the lists of an event (its receivers, what it
 * saw of keywords and fields) as the text of their own array literals
 * (listLiteral), cast row by row: unnest and array_in cost PostgreSQL about
 * a quarter of what json_to_recordset does for the same rows, which builds a
 * hash table for every object it reads.
 */
const CONSUME_CTES = `consumed as (
       delete from asset_webhooks.outbox o
       where o.seq between $3 and $4 and o.seq + 0 = any($2::bigint[])
       returning o.*
     ),
     moved as (
       insert into asset_webhooks.events
         (event_id, seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, run_id, coalesced_at, collapsed_into,
          routing_id, delivered_to, payload_ids, asset_gone, seen_supertype, seen_parent_id, seen_state, seen_schema_id, seen_type_id,
          seen_domain_id, seen_keywords, seen_field_names, seen_field_values)
       select r.event_id, c.seq, c.occurred_at, c.event_type, c.asset_id, coalesce(c.asset_uuid, r.asset_uuid), r.atom_id, $1,
              clock_timestamp(), r.collapsed_into,
              $5, r.delivered_to::integer[], r.payload_ids::bigint[], r.asset_gone, r.seen_supertype, r.seen_parent_id, r.seen_state,
              r.seen_schema_id, r.seen_type_id, r.seen_domain_id, r.seen_keywords::text[], r.seen_field_names::text[],
              r.seen_field_values::text[]
       from consumed c
       join unnest($2::bigint[], $7::uuid[], $8::bigint[], $9::uuid[], $10::uuid[], $11::text[], $12::text[], $13::boolean[],
                   $14::text[], $15::bigint[], $16::text[], $17::bigint[], $18::bigint[], $19::bigint[], $20::text[], $21::text[],
                   $22::text[])
         as r(seq, event_id, atom_id, asset_uuid, collapsed_into, delivered_to, payload_ids, asset_gone, seen_supertype,
              seen_parent_id, seen_state, seen_schema_id, seen_type_id, seen_domain_id, seen_keywords, seen_field_names,
              seen_field_values)
         on r.seq = c.seq
     )`;

/**
 * The statements that write one coalescing chunk, in order, built now (see
 * payloadInserts). `routingId` is the configuration the run routes by (see
 * recordRouting). One statement when the chunk's payload rows fit one
 * INSERT, as they nearly always do, so that its transaction is the
 * statement's own. It moves the chunk's events from the outbox to `events`
 * with their routes, writes its payloads, and counts the events on the run
 * (so a run that dies later still shows what it committed) and the routing's
 * last use (retention purges by it). `events` must not be empty.
 */
export function chunkStatements(
  runId: number,
  routingId: number,
  events: ConsumedEvents,
  batches: readonly Batch[],
  webhookTimestamp: string,
): Statement[] {
  const inserts = payloadInserts(batches, webhookTimestamp);
  const last = inserts.pop();
  const statements = inserts.map((rows) => payloadStatement(runId, rows));
  // $1 the run, $2-$5 and $7-$22 the events (consumeValues), $6 their count, then the payload rows.
  const { head, columns } = consumeValues(routingId, events);
  const values: unknown[] = [runId, ...head, events.seqs.length, ...columns];
  let payloads = '';
  if (last) {
    const insert = renderPayloadInsert(last, values.length + 1);
    values.push(...insert.values);
    payloads = `written as (${insert.text}),`;
  }
  statements.push({
    text: `with ${CONSUME_CTES}, ${payloads}
       used as (update asset_webhooks.routings set last_used_at = clock_timestamp() where routing_id = $5)
     update asset_webhooks.coalesce_runs set events = events + $6 where run_id = $1`,
    values,
  });
  return statements;
}

/** $2-$5 and $7-$22 of CONSUME_CTES ($6 is the statement's own). */
function consumeValues(routingId: number, events: ConsumedEvents): { head: unknown[]; columns: string[] } {
  const { seqs, seen } = events;
  const n = seqs.length;
  const column = (): Array<string | null> => new Array<string | null>(n);
  const deliveredTo = column();
  const payloadIds = column();
  const keywords = column();
  const fieldNames = column();
  const fieldValues = column();
  for (let i = 0; i < n; i += 1) {
    const row = seen[i]!;
    deliveredTo[i] = listLiteral(events.deliveredTo[i]!);
    payloadIds[i] = listLiteral(events.payloadIds[i]!);
    keywords[i] = listLiteral(row.seen_keywords);
    fieldNames[i] = listLiteral(row.seen_field_names);
    fieldValues[i] = listLiteral(row.seen_field_values);
  }
  return {
    head: [arrayLiteral(seqs), seqs[0], seqs[n - 1], routingId],
    columns: [
      events.eventIds,
      events.atomIds,
      events.assetUuids,
      events.collapsedInto,
      deliveredTo,
      payloadIds,
      seen.map((row) => row.asset_gone),
      seen.map((row) => row.seen_supertype),
      seen.map((row) => row.seen_parent_id),
      seen.map((row) => row.seen_state),
      seen.map((row) => row.seen_schema_id),
      seen.map((row) => row.seen_type_id),
      seen.map((row) => row.seen_domain_id),
      keywords,
      fieldNames,
      fieldValues,
    ].map(arrayLiteral),
  };
}
