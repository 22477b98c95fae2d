import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { SeenValues } from '../coalesce/seen.js';
import { NOTHING_SEEN } from '../payloads/seen-row.js';
import { assetStateFromRow } from '../db/asset-state.js';
import type { CompiledWebhook } from '../filters/compile.js';
import { serializeEvent } from '../payloads/serialize.js';
import { readAssetChunk } from '../sweep/assets.js';
import type { SweptEvent } from '../sweep/events.js';
import { MirrorMembers } from './members.js';
import { leavingCheck } from './route.js';
import { eventTimestampText } from '../db/event-timestamp.js';

/** An event a reconcile chunk decided to send, serialized, before it is packed into a payload. */
export interface DecidedEvent extends Omit<SweptEvent, 'batch'> {
  readonly json: string;
}

/** What one reconcile chunk read and decided. */
export interface DecidedChunk {
  readonly events: DecidedEvent[];
  /** The membership the events leave (MirrorMembers.takeChanges). */
  readonly members: MirrorMembers;
  readonly read: number;
  /** The phase has no asset after this chunk. */
  readonly phaseOver: boolean;
  /** Within the phase, every asset up to this id is done once the chunk commits. */
  readonly last: string | null;
}

/** What the reconcile of one webhook checks an asset with. */
export interface ReconcileChecks {
  readonly webhookId: string;
  readonly compiled: CompiledWebhook;
  readonly seen: SeenValues;
}

type Sent = Omit<DecidedEvent, 'json' | 'eventId' | 'occurredAt'>;

/**
 * Gathers a chunk's events, each with an eventTimestamp after the last one
 * sent for its asset to any mirror webhook (MirrorMembers.nextMs), and the
 * membership it leaves. The membership is read afresh for each chunk: the
 * chunk before committed, and another reconcile of the webhook may have
 * written since.
 */
class ChunkEvents {
  readonly events: DecidedEvent[] = [];
  readonly members = new MirrorMembers();

  constructor(private readonly webhookId: string) {}

  send(event: Sent, readMs: number): void {
    const at = this.members.nextMs(event.assetId, readMs);
    const occurredAt = new Date(at).toISOString();
    const eventId = randomUUID();
    const json = serializeEvent({ ...event, eventId, eventTimestamp: occurredAt, assetUuid: event.assetUuid ?? '' });
    this.events.push({ ...event, eventId, occurredAt, json });
    this.members.record(event.assetId, event.assetUuid, this.webhookId, event.eventType === 'EDITED', at);
  }
}

/**
 * The assets phase: the next chunk of the binding's assets, an EDITED for
 * each that passes the checks, is not in the Trash and is not in the set,
 * an UNMATCHED for each member that no longer passes them. And for a member
 * whose Trash state is not the one the webhook was last told (moved to the
 * Trash or restored while no event of it reached the webhook: excluded while
 * it was plain, or disabled), what puts the receiver's copy right: an
 * UNMATCHED for one in the Trash last sent as active, an EDITED for one
 * active and passing last sent as DELETED (see lastToldTrashed).
 */
export async function decideAssets(
  client: pg.PoolClient,
  checks: ReconcileChecks,
  after: string | null,
  size: number,
): Promise<DecidedChunk> {
  const rows = await readAssetChunk(client, after, null, size);
  const chunk = new ChunkEvents(checks.webhookId);
  await chunk.members.load(
    client,
    rows.map((state) => state.asset_key),
  );
  const told = await lastToldTrashed(
    client,
    checks.webhookId,
    rows.map((state) => state.asset_key),
  );
  for (const state of rows) {
    const asset = assetStateFromRow(state);
    const passes = leavingCheck(checks.compiled, asset) === null;
    const member = chunk.members.isMember(checks.webhookId, state.asset_key);
    const common = {
      assetId: state.asset_key,
      assetUuid: asset.assetUuid,
      atomId: asset.latestAtomId,
      seen: checks.seen.of(asset),
    };
    const readMs = Date.parse(state.read_at);
    const toldTrashed = told.get(state.asset_key);
    if (passes && !member && state.in_trash !== true) chunk.send({ ...common, eventType: 'EDITED' }, readMs);
    else if (!passes && member) chunk.send({ ...common, eventType: 'UNMATCHED' }, readMs);
    else if (member && state.in_trash === true && toldTrashed === false)
      chunk.send({ ...common, eventType: 'UNMATCHED', inTrash: true }, readMs);
    else if (member && state.in_trash === false && toldTrashed === true)
      chunk.send({ ...common, eventType: 'EDITED' }, readMs);
  }
  const last = rows.at(-1)?.asset_key ?? after;
  return { events: chunk.events, members: chunk.members, read: rows.length, phaseOver: rows.length < size, last };
}

/**
 * Of the assets the webhook's set holds among `assetIds`, whether the last
 * event sent to it (the one at its sent_at time, as asset_webhooks.events
 * keeps it) was a DELETED (true) or a CREATED, EDITED or REVERSION (false).
 * An asset whose event retention no longer keeps is missing: nothing is
 * known of what the receiver holds, and it is left as it is. An event sent
 * to the webhook as an UNMATCHED is not the one: its asset left the set.
 */
async function lastToldTrashed(
  client: pg.PoolClient,
  webhookId: string,
  assetIds: readonly string[],
): Promise<Map<string, boolean>> {
  if (assetIds.length === 0) return new Map();
  const { rows } = await client.query<{ asset_id: string; trashed: boolean }>(
    `select m.asset_id::text as asset_id, bool_or(e.event_type = 'DELETED') as trashed
     from asset_webhooks.mirror_members m
     cross join lateral (select (m.sent_at ->> $1)::timestamptz as sent) t
     join asset_webhooks.events e on e.asset_id = m.asset_id and e.occurred_at >= t.sent
       and e.occurred_at < t.sent + interval '1 millisecond'
     join asset_webhooks.routing_webhooks w on w.routing_id = e.routing_id and w.webhook_id = $1
     where m.asset_id = any($2::bigint[]) and $1 = any(m.webhooks)
       and w.position = any(e.delivered_to) and not w.position = any(coalesce(e.unmatched_to, '{}'))
     group by m.asset_id`,
    [webhookId, assetIds],
  );
  return new Map(rows.map((row) => [row.asset_id, row.trashed]));
}

/**
 * The gone phase: the next chunk of the set's members whose asset no longer
 * exists (their PURGED never reached the webhook: sent while it was
 * disabled), an UNMATCHED for each.
 */
export async function decideGone(
  client: pg.PoolClient,
  webhookId: string,
  after: string | null,
  size: number,
): Promise<DecidedChunk> {
  const { rows } = await client.query<{ asset_id: string; asset_uuid: string | null; now: string }>(
    `select m.asset_id::text as asset_id, m.asset_uuid,
            ${eventTimestampText('statement_timestamp()')} as now
     from asset_webhooks.mirror_members m
     where $1 = any(m.webhooks) and m.asset_id > coalesce($2::bigint, -9223372036854775808)
       and not exists (select 1 from asset_webhooks.asset_state s where s.asset_id = m.asset_id)
     order by m.asset_id
     limit $3`,
    [webhookId, after, size],
  );
  const chunk = new ChunkEvents(webhookId);
  // Its other mirror webhooks' membership is kept: the row is rewritten whole.
  await chunk.members.load(
    client,
    rows.map((gone) => gone.asset_id),
  );
  for (const gone of rows) {
    const seen = { ...NOTHING_SEEN, asset_gone: true };
    const event = { assetId: gone.asset_id, assetUuid: gone.asset_uuid, atomId: null, seen };
    chunk.send({ ...event, eventType: 'UNMATCHED' }, Date.parse(gone.now));
  }
  const last = rows.at(-1)?.asset_id ?? after;
  return { events: chunk.events, members: chunk.members, read: 0, phaseOver: rows.length < size, last };
}
