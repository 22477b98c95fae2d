import type pg from 'pg';
import { assetStateFromRow, type AssetStateRow } from '../filters/read-asset-state.js';
import type { AssetState, EventType } from '../interfaces.js';

/** One claimed outbox row with what the coalescer needs to decide its routes. */
export interface ClaimedEvent {
  readonly seq: number;
  readonly eventId: string;
  /** ISO-8601 UTC with milliseconds and Z, formatted by PostgreSQL (no Date per row). */
  readonly eventTimestamp: string;
  readonly eventType: EventType;
  readonly assetId: number;
  readonly assetUuid: string | null;
  readonly atomId: number | null;
  /** For EDITED: the latest EDITED event of the same asset in this run. */
  readonly latestEditId: string | null;
  /** The asset's current state; null when the asset no longer exists. */
  readonly asset: AssetState | null;
}

/** An outbox row (event_ columns) with its asset's state (null columns when the asset is gone). */
interface ClaimRow extends Omit<AssetStateRow, 'asset_id'> {
  seq: number;
  event_id: string;
  event_timestamp: string;
  event_type: EventType;
  event_asset_id: number;
  event_asset_uuid: string | null;
  atom_id: number | null;
  latest_edit_id: string | null;
  asset_id: number | null;
}

/**
 * Claims the next chunk of outbox rows up to `maxSeq`, in order of capture,
 * with the current state of their assets read through the binding's view in
 * the same query (one query per chunk, never one per event). Rows stay locked
 * until the caller's transaction deletes them; rows another transaction holds
 * are skipped, not waited for.
 *
 * This must run inside the transaction that consumes the rows.
 */
export async function claimChunk(client: pg.PoolClient, maxSeq: number, limit: number): Promise<ClaimedEvent[]> {
  const { rows } = await client.query<ClaimRow>(
    `with claimed as materialized (
       select o.* from asset_webhooks.outbox o
       where o.seq <= $1
       order by o.seq
       limit $2
       for update skip locked
     ),
     states as materialized (
       select s.* from asset_webhooks.asset_state s
       where s.asset_id in (select distinct asset_id from claimed)
     )
     select c.seq, coalesce(c.event_id, asset_webhooks.event_id_of(c.seq, c.occurred_at)) as event_id,
            to_char(c.occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as event_timestamp, c.event_type,
            c.asset_id as event_asset_id, c.asset_uuid as event_asset_uuid, c.atom_id,
            case when c.event_type = 'EDITED' then (
              select coalesce(l.event_id, asset_webhooks.event_id_of(l.seq, l.occurred_at)) from asset_webhooks.outbox l
              where l.asset_id = c.asset_id and l.event_type = 'EDITED' and l.seq <= $1
              order by l.seq desc limit 1) end as latest_edit_id,
            s.asset_id, s.asset_uuid, s.supertype, s.parent_id, s.state,
            s.schema_id, s.type_id, s.domain_id, s.latest_atom_id, s.keywords, s.field_names, s.field_values
     from claimed c
     left join states s on s.asset_id = c.asset_id
     order by c.seq`,
    [maxSeq, limit],
  );
  return rows.map(toClaimedEvent);
}

function toClaimedEvent(row: ClaimRow): ClaimedEvent {
  // asset_id is checked here; the rest of the state columns come with it.
  const asset = row.asset_id === null ? null : assetStateFromRow(row as AssetStateRow);
  return {
    seq: row.seq,
    eventId: row.event_id,
    eventTimestamp: row.event_timestamp,
    eventType: row.event_type,
    assetId: row.event_asset_id,
    assetUuid: row.event_asset_uuid ?? asset?.assetUuid ?? null,
    atomId: row.atom_id,
    latestEditId: row.latest_edit_id,
    asset,
  };
}

/** The highest seq committed so far: a run takes everything up to it. */
export async function outboxHighWater(client: pg.Pool | pg.PoolClient): Promise<number | null> {
  const { rows } = await client.query<{ max: number | null }>('select max(seq) as max from asset_webhooks.outbox');
  return rows[0]?.max ?? null;
}
