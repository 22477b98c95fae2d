import type pg from 'pg';
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
  if (batches.length === 0) return;
  const bodies = batches.map((batch) => batchBody(batch, webhookTimestamp));
  await client.query(
    `insert into asset_webhooks.payloads
       (payload_id, webhook_id, run_id, status, body, byte_size, event_count, event_ids,
        dead_letter_reason, dead_lettered_at)
     overriding system value
     select b.payload_id, b.webhook_id, $1, b.status, b.body, octet_length(b.body), b.event_count,
            string_to_array(b.event_ids, ',')::uuid[],
            case when b.too_large then 'too_large' end, case when b.too_large then clock_timestamp() end
     from unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[], $8::boolean[])
       as b(payload_id, webhook_id, status, body, event_count, event_ids, too_large)
     on conflict (payload_id) do update
       set status = excluded.status, body = excluded.body, byte_size = excluded.byte_size,
           event_count = excluded.event_count, event_ids = excluded.event_ids`,
    [
      runId,
      batches.map((batch) => batch.payloadId),
      batches.map((batch) => batch.webhookId),
      batches.map((batch) => (batch.tooLarge ? 'dead_lettered' : batch.sealed ? 'pending' : 'open')),
      bodies,
      batches.map((batch) => batch.events.length),
      batches.map((batch) => batch.eventIds.join(',')),
      batches.map((batch) => batch.tooLarge),
    ],
  );
}

/** One consumed event, ready to be written to asset_webhooks.events. */
export interface ConsumedEvent {
  readonly seq: number;
  readonly atomId: number | null;
  readonly collapsedInto: string | null;
  /** JSON object: webhook id to payload id (number) or reason (string). */
  readonly routes: string;
}

/**
 * Moves the claimed rows from the outbox to asset_webhooks.events with their
 * routes, in one statement. Runs in the chunk's transaction, after the claim.
 */
export async function consumeEvents(client: pg.PoolClient, runId: number, events: readonly ConsumedEvent[]): Promise<void> {
  if (events.length === 0) return;
  await client.query(
    `with consumed as (
       delete from asset_webhooks.outbox o
       where o.seq = any($2::bigint[])
       returning o.*
     )
     insert into asset_webhooks.events
       (event_id, seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, run_id, coalesced_at, collapsed_into, routes)
     select c.event_id, c.seq, c.occurred_at, c.event_type, c.asset_id, c.asset_uuid, r.atom_id, $1,
            clock_timestamp(), r.collapsed_into, r.routes::jsonb
     from consumed c
     join unnest($2::bigint[], $3::bigint[], $4::uuid[], $5::text[]) as r(seq, atom_id, collapsed_into, routes)
       on r.seq = c.seq`,
    [
      runId,
      events.map((event) => event.seq),
      events.map((event) => event.atomId),
      events.map((event) => event.collapsedInto),
      events.map((event) => event.routes),
    ],
  );
}

/** Starts delivery of the webhooks' pending payloads (see asset_webhooks.dispatch). */
export async function dispatchWebhooks(client: pg.PoolClient | pg.Pool, webhookIds: Iterable<string>): Promise<void> {
  const ids = [...new Set(webhookIds)];
  if (ids.length === 0) return;
  await client.query('select asset_webhooks.dispatch(id) from unnest($1::text[]) as id order by id', [ids]);
}
