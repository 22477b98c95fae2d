import type pg from 'pg';
import type { SweepRecord } from '../sweep/record.js';
import type { ReplaySelection } from './selection.js';

/** One row of asset_webhooks.replays, as the replay reads it. */
export interface ReplayRow {
  readonly replayId: number;
  /** The window's highest payload id when the replay started: the walk ends there. Null: the window was empty. */
  readonly maxPayloadId: number | null;
  /** Every selected payload up to this id is done; null before the first batch. */
  readonly lastPayloadId: number | null;
  readonly payloads: number;
  readonly events: number;
}

/** The columns a replay's batch sets (recordSweepChunk). */
export const REPLAY_RECORD: SweepRecord = {
  kind: 'replay',
  columns: { last_payload_id: 'bigint', payloads: 'bigint', events: 'bigint' },
};

/**
 * asset_webhooks.replays.selection_key of the selection ($1 to $6). The
 * window's bounds are read as seconds since the epoch, never as text, which
 * would follow the session's time zone: the same command resumes its replay
 * from a session in any zone (sql/migrations/0010_replay_key.sql).
 */
const SELECTION_KEY = `md5(concat_ws('|', $1::text, coalesce($2::text, ''), extract(epoch from $3::timestamptz)::text,
  extract(epoch from $4::timestamptz)::text,
  coalesce(array_to_string($5::bigint[], ','), '*'), coalesce(array_to_string($6::text[], ','), '*')))`;

const COLUMNS = `replay_id::float8 as "replayId", max_payload_id::float8 as "maxPayloadId",
  last_payload_id::float8 as "lastPayloadId", payloads::float8 as "payloads", events::float8 as "events"`;

/** The key's parameters: assets and types sorted, so the same request in another order is the same replay. */
function keyParameters(selection: ReplaySelection, toWebhookId: string | null): unknown[] {
  return [
    selection.webhookId,
    toWebhookId,
    selection.from,
    selection.to,
    selection.assetIds === null ? null : [...selection.assetIds].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)),
    selection.eventTypes === null ? null : [...selection.eventTypes].sort(),
  ];
}

/** The unfinished replay of this selection and target, or null. */
export async function findRunningReplay(
  client: pg.PoolClient,
  selection: ReplaySelection,
  toWebhookId: string | null,
): Promise<ReplayRow | null> {
  const { rows } = await client.query<ReplayRow>(
    `select ${COLUMNS} from asset_webhooks.replays where status = 'running' and selection_key = ${SELECTION_KEY}`,
    keyParameters(selection, toWebhookId),
  );
  return rows[0] ?? null;
}

/**
 * The unfinished replay of this selection and target, or a new one that
 * walks up to `maxPayloadId`: a request with the arguments of a replay that
 * was interrupted resumes it. A completed replay is never resumed: the same
 * request again replays again. Run under the webhook's replay lock.
 */
export async function startOrResumeReplay(
  client: pg.PoolClient,
  selection: ReplaySelection,
  toWebhookId: string | null,
  maxPayloadId: number | null,
  requestedBy: string,
): Promise<{ replay: ReplayRow; resumed: boolean }> {
  const {
    rows: [created],
  } = await client.query<ReplayRow>(
    `insert into asset_webhooks.replays
       (webhook_id, to_webhook_id, from_time, to_time, asset_ids, event_types, selection_key, max_payload_id, requested_by)
     values ($1, $2, $3, $4, $5::bigint[], $6::text[], ${SELECTION_KEY}, $7, $8)
     on conflict (selection_key) where status = 'running' do nothing
     returning ${COLUMNS}`,
    [...keyParameters(selection, toWebhookId), maxPayloadId, requestedBy],
  );
  if (created) return { replay: created, resumed: false };
  const running = await findRunningReplay(client, selection, toWebhookId);
  // Completed between the insert and the read: start afresh.
  if (!running) return startOrResumeReplay(client, selection, toWebhookId, maxPayloadId, requestedBy);
  return { replay: running, resumed: true };
}
