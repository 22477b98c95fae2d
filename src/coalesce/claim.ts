import type pg from 'pg';
import { ASSET_STATE_COLUMNS, assetStateColumns, assetStateFromRow, type AssetStateRow } from '../db/asset-state.js';
import type { AssetState, DecimalId, EventType } from '../interfaces.js';
import { EventIds, millisOf } from './event-ids.js';
import { eventTimestampText } from '../db/event-timestamp.js';

/** One claimed outbox row with what the coalescer needs to decide its routes. */
export interface ClaimedEvent {
  readonly seq: number;
  readonly eventId: string;
  /** ISO-8601 UTC with milliseconds and Z, formatted by PostgreSQL (no Date per row). */
  readonly eventTimestamp: string;
  readonly eventType: EventType;
  readonly assetId: DecimalId;
  readonly assetUuid: string | null;
  /** The outbox row carried the asset's uuid (else assetUuid is the asset's own, or null). */
  readonly assetUuidCaptured: boolean;
  readonly atomId: DecimalId | null;
  /** For EDITED: the latest EDITED event of the same asset in this run. */
  readonly latestEditId: string | null;
  /** The asset's current state; null when the asset no longer exists. */
  readonly asset: AssetState | null;
  /** The claim's row, with the columns the routing features read (FeatureRead); null when none reads any. */
  readonly featureColumns: Readonly<Record<string, unknown>> | null;
  /**
   * An EDITED or REVERSION of an asset in the Trash: captured while it was in
   * the Trash (the outbox row's in_trash), or in the Trash now. Excluded for
   * every webhook as `in_trash`.
   */
  readonly inTrash: boolean;
  /**
   * Epoch milliseconds of the latest eventTimestamp stored for the asset in
   * asset_webhooks.events when the chunk was read; null when it has none
   * (see AssetClock).
   */
  readonly lastMs: number | null;
}

/** An outbox row (event_ columns) with its asset's state (null columns when the asset is gone). */
interface ClaimRow extends Omit<AssetStateRow, 'asset_id'> {
  seq: number;
  /** Set by a binding that gives its own ids; null when the id is derived (EventIds). */
  event_id: string | null;
  event_timestamp: string;
  event_type: EventType;
  event_asset_id: DecimalId;
  event_asset_uuid: string | null;
  atom_id: DecimalId | null;
  /** For EDITED: the asset's latest EDITED row in the run (seq, capture time, stored id). */
  latest_edit_seq: number | null;
  latest_edit_ms: number | null;
  latest_edit_event_id: string | null;
  asset_id: DecimalId | null;
  in_trash: boolean;
  last_ms: string | null;
}

/** Which of an asset's lists the run's checks read (see SeenValues.reads). */
export interface StateReads {
  readonly keywords: boolean;
  readonly fields: boolean;
  /**
   * The binding's view has the column in_trash (see viewHasInTrash); when it
   * has not, only the capture says whether a change was made in the Trash.
   * Default true.
   */
  readonly inTrash?: boolean;
}

export const READ_ALL_STATE: StateReads = { keywords: true, fields: true };

/**
 * Whether the binding's view has in_trash: a binding installed before the
 * column existed still coalesces (run warns of it at start).
 */
export async function viewHasInTrash(client: pg.Pool | pg.PoolClient): Promise<boolean> {
  const { rows } = await client.query<{ found: boolean }>(
    `select exists (select 1 from pg_catalog.pg_attribute
                    where attrelid = to_regclass('asset_webhooks.asset_state') and attname = 'in_trash'
                      and not attisdropped) as found`,
  );
  return rows[0]?.found === true;
}

/** The view's columns as the claim reads them (alias `s`): a list no check reads as an empty one. */
function readColumns(reads: StateReads): string {
  const unread = new Set([
    ...(reads.keywords ? [] : ['keywords']),
    ...(reads.fields ? [] : ['field_names', 'field_values']),
  ]);
  return ASSET_STATE_COLUMNS.map(([name, type]) => (unread.has(name) ? `'{}'::${type} as ${name}` : `s.${name}`)).join(
    ', ',
  );
}

/** What a routing feature reads with each claimed outbox row (`c`), in the chunk's snapshot (RoutingFeature.read). */
export interface FeatureRead {
  /** The select list it adds, each column aliased with a name of the feature's own. */
  readonly columns: string;
  /** The `left join` that gives those columns, on `c.asset_id`, with an alias of the feature's own. */
  readonly join: string;
}

/** What claimChunk reads besides the outbox rows. */
export interface ClaimOptions {
  /** Which of an asset's lists some check reads. Default: all. */
  readonly reads?: StateReads;
  /** What the run's routing features read with each row (RoutingFeature.read). Default none. */
  readonly features?: readonly FeatureRead[];
  /**
   * Read the latest stored eventTimestamp (ClaimedEvent.lastMs) only of the
   * assets with a row whose own time, in epoch milliseconds, is not after
   * this: the highest eventTimestamp any event was given before the chunk
   * (AssetClock.watermark). A later own time cannot be raised by anything
   * stored. Default null: of every asset.
   */
  readonly probeUpToMs?: number | null;
}

/** One chunk of the outbox as read: the events to coalesce now, and where the read stopped. */
export interface Chunk {
  readonly events: ClaimedEvent[];
  /** Rows read, deferred ones included: fewer than the limit means the run's rows are all read. */
  readonly read: number;
  /** The seq of the last row read: the next chunk starts after it. */
  readonly lastSeq: number;
  /** Rows left in the outbox for the next run: see claimChunk. */
  readonly deferred: number;
}

/**
 * Reads the next chunk of outbox rows after `afterSeq` up to `maxSeq`, in
 * order of capture, with the current state of their assets read through the
 * binding's view in the same query (one query per chunk, never one per event).
 *
 * Each chunk reads in its own snapshot, so that no snapshot is held for the
 * whole run: one held for a long run keeps every dead row of the database
 * from being pruned, delivery's and the asset tables' alike. Rows are not
 * locked: only the run holding the coalescing lock reads or deletes outbox
 * rows, so the read runs while the previous chunk is still being written on
 * another connection.
 *
 * A transaction that commits while the run goes on is seen by the chunks that
 * read past it, and its rows the run had already passed wait for the next
 * run. So that a run never carries two EDITED events of one asset, and an
 * asset's events keep their order, a row the run's start did not see (an
 * EDITED row newer than its asset's recorded edit, or any row in an unseen
 * range) is left in the outbox for the next run when no edit the start saw
 * comes after it, and so is every later row of the same asset in the run
 * (`aw_deferred` carries them from chunk to chunk). A late row that a
 * recorded edit comes after is taken: that edit goes out with this run, and
 * earlier edits may already have been collapsed into it. (The rows of one
 * transaction cannot be told apart in the outbox: the capture trigger writes
 * them in subtransactions, each with an xid of its own.)
 *
 * `reads` says which of the asset's lists some check reads; a list no check
 * reads is given as empty, and its part of the binding's view is not computed.
 * Each row says whether it is a change in the Trash (ClaimedEvent.inTrash:
 * the capture's word, or the view's in_trash now) and carries its asset's
 * latest stored eventTimestamp (ClaimedEvent.lastMs). With `features`, each
 * row carries what they read, in the chunk's snapshot (see RoutingFeature.absorb).
 *
 * This must run on the session that ran recordRunStart for this run, with the
 * EventIds it returned.
 */
export async function claimChunk(
  session: pg.PoolClient,
  ids: EventIds,
  maxSeq: number,
  afterSeq: number,
  limit: number,
  options: ClaimOptions = {},
): Promise<Chunk> {
  const { reads = READ_ALL_STATE, features = [], probeUpToMs = null } = options;
  const { rows } = await session.query<ClaimRow & { deferred: boolean }>(
    `with claimed as materialized (
       -- The upper bound is applied after the limit: with both bounds inside,
       -- a planner whose statistics were taken while the outbox was empty
       -- (its usual state) expects fewer rows than the limit and reads the
       -- whole backlog for every chunk. One bound leads it down the primary key.
       -- Rows above maxSeq are dropped afterwards; they come after every row
       -- at or below it, so the chunk still holds all it should.
       select c.*
       from (select o.* from asset_webhooks.outbox o where o.seq > $2 order by o.seq limit $3) c
       where c.seq <= $1
     ),
     states as materialized (
       -- Only the columns some check reads: the planner then drops the parts
       -- of the view that compute the others (the reference binding's
       -- aggregates of keywords and of fields, one index probe each per asset).
       select ${readColumns(reads)}, ${reads.inTrash === false ? 'null::boolean as in_trash' : 's.in_trash'}
       from asset_webhooks.asset_state s
       where s.asset_id in (select distinct asset_id from claimed)
     ),
     clocks as materialized (
       -- The latest eventTimestamp stored for each asset (events.occurred_at
       -- is the eventTimestamp as sent): one backward probe of events_asset
       -- per asset that has a row not after probeUpToMs. See AssetClock.
       select a.asset_id,
              (select floor(extract(epoch from e.occurred_at) * 1000)::bigint from asset_webhooks.events e
               where e.asset_id = a.asset_id order by e.asset_id desc, e.occurred_at desc limit 1) as last_ms
       from (select distinct c.asset_id from claimed c
             where $4::bigint is null or floor(extract(epoch from c.occurred_at) * 1000) <= $4::bigint) a
     ),
     covered as (
       select c.*, le.seq as le_seq, le.occurred_ms as le_ms, le.event_id as le_event_id,
              case
                when le.seq >= c.seq then false
                when c.event_type = 'EDITED' then true
                else exists (select 1 from (select u.hi from pg_temp.aw_unseen u where u.lo <= c.seq order by u.lo desc limit 1) g
                             where g.hi >= c.seq)
              end as late
       from claimed c
       -- One index probe per row: hashing the whole table cost a chunk time
       -- in proportion to the backlog, not to the chunk.
       left join lateral (select l.seq, l.occurred_ms, l.event_id from pg_temp.aw_last_edit l where l.asset_id = c.asset_id offset 0) le on true
     ),
     marked as materialized (
       select c.*, bool_or(c.late) over (partition by c.asset_id order by c.seq)
                   or exists (select 1 from pg_temp.aw_deferred d where d.asset_id = c.asset_id) as deferred
       from covered c
     ),
     noted as (
       insert into pg_temp.aw_deferred (asset_id) select distinct asset_id from marked where deferred
       on conflict do nothing
     )
     select c.seq, c.event_id,
            ${eventTimestampText('c.occurred_at')} as event_timestamp, c.event_type,
            c.asset_id::text as event_asset_id, c.asset_uuid as event_asset_uuid, c.atom_id::text as atom_id,
            case when c.event_type = 'EDITED' then c.le_seq end as latest_edit_seq,
            case when c.event_type = 'EDITED' then c.le_ms end as latest_edit_ms,
            case when c.event_type = 'EDITED' then c.le_event_id end as latest_edit_event_id, c.deferred,
            c.event_type in ('EDITED', 'REVERSION') and (c.in_trash or s.in_trash) is true as in_trash,
            k.last_ms::text as last_ms,
            ${assetStateColumns('s')}${features.map((feature) => `, ${feature.columns}`).join('')}
     from marked c
     left join states s on s.asset_id = c.asset_id
     left join clocks k on k.asset_id = c.asset_id
     ${features.map((feature) => feature.join).join('\n     ')}
     order by c.seq`,
    [maxSeq, afterSeq, limit, probeUpToMs],
  );
  const events: ClaimedEvent[] = [];
  for (const row of rows) if (!row.deferred) events.push(toClaimedEvent(row, ids, features.length > 0));
  return {
    events,
    read: rows.length,
    lastSeq: rows.length === 0 ? afterSeq : rows[rows.length - 1]!.seq,
    deferred: rows.length - events.length,
  };
}

function toClaimedEvent(row: ClaimRow, ids: EventIds, featureColumns: boolean): ClaimedEvent {
  // asset_id is checked here; the rest of the state columns come with it.
  const asset = row.asset_id === null ? null : assetStateFromRow(row as AssetStateRow);
  // The row's own capture time, to the millisecond, is in its formatted timestamp.
  const eventId = row.event_id ?? ids.of(row.seq, millisOf(row.event_timestamp));
  const latestEditId =
    row.latest_edit_seq === null
      ? null
      : row.latest_edit_seq === row.seq
        ? eventId
        : (row.latest_edit_event_id ?? ids.of(row.latest_edit_seq, row.latest_edit_ms!));
  return {
    seq: row.seq,
    eventId,
    eventTimestamp: row.event_timestamp,
    eventType: row.event_type,
    assetId: row.event_asset_id,
    assetUuid: row.event_asset_uuid ?? asset?.assetUuid ?? null,
    assetUuidCaptured: row.event_asset_uuid !== null,
    atomId: row.atom_id,
    latestEditId,
    asset,
    featureColumns: featureColumns ? (row as unknown as Record<string, unknown>) : null,
    inTrash: row.in_trash,
    lastMs: row.last_ms === null ? null : Number(row.last_ms),
  };
}
