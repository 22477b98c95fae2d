import type pg from 'pg';
import { releaseSessionLock, takeSessionLock } from '../db/session-lock.js';
import { UserError } from '../errors.js';

/** One row of asset_webhooks.backfills, as the backfill reads it. Asset ids are decimal strings: they may exceed 2^53. */
export interface BackfillRow {
  readonly backfillId: number;
  readonly webhookId: string;
  readonly status: 'running' | 'completed';
  /** Every asset up to this id is done; null before the first chunk. */
  readonly lastAssetId: string | null;
  readonly assetsRead: number;
  readonly eventsSent: number;
  readonly excluded: number;
  readonly payloads: number;
}

/** asset_webhooks.backfills.assets_key of the listed assets ($2, ascending and distinct; null for every asset). */
const ASSETS_KEY = "coalesce(md5(array_to_string($2::bigint[], ',')), 'all')";

const COLUMNS = `backfill_id as "backfillId", webhook_id as "webhookId", status, last_asset_id::text as "lastAssetId",
  assets_read::float8 as "assetsRead", events_sent::float8 as "eventsSent", excluded::float8 as "excluded", payloads::float8 as "payloads"`;

/** The unfinished backfill of these arguments (the webhook, and the listed assets or all), or null. */
export async function findRunningBackfill(
  client: pg.Pool | pg.PoolClient,
  webhookId: string,
  assetIds: readonly string[] | null,
): Promise<BackfillRow | null> {
  const { rows } = await client.query<BackfillRow>(
    `select ${COLUMNS} from asset_webhooks.backfills
     where status = 'running' and webhook_id = $1 and assets_key = ${ASSETS_KEY}`,
    [webhookId, assetIds],
  );
  return rows[0] ?? null;
}

/**
 * The unfinished backfill of these arguments, or a new one: a request with
 * the arguments of a backfill that was interrupted resumes it. A completed
 * backfill is never resumed.
 */
export async function startOrResumeBackfill(
  client: pg.PoolClient,
  webhookId: string,
  assetIds: readonly string[] | null,
  requestedBy: string,
): Promise<{ backfill: BackfillRow; resumed: boolean }> {
  const {
    rows: [created],
  } = await client.query<BackfillRow>(
    `insert into asset_webhooks.backfills (webhook_id, asset_ids, assets_key, requested_by) values ($1, $2::bigint[], ${ASSETS_KEY}, $3)
     on conflict (webhook_id, assets_key) where status = 'running' do nothing
     returning ${COLUMNS}`,
    [webhookId, assetIds, requestedBy],
  );
  if (created) return { backfill: created, resumed: false };
  const running = await findRunningBackfill(client, webhookId, assetIds);
  // Completed between the insert and the read by another process: start afresh.
  if (!running) return startOrResumeBackfill(client, webhookId, assetIds, requestedBy);
  return { backfill: running, resumed: true };
}

/**
 * Holds the backfill for this session until it ends: a second process given
 * the same arguments is refused instead of sending the same assets. The lock
 * is the session's, so a process killed mid-backfill frees it with its
 * connection.
 */
export async function lockBackfill(session: pg.PoolClient, backfill: BackfillRow): Promise<BackfillRow> {
  if (!(await takeSessionLock(session, `backfill:${backfill.backfillId}`))) {
    throw new UserError(
      'backfill_busy',
      `backfill ${backfill.backfillId} of webhook ${backfill.webhookId}: expected no other process to be running it, but one is (wait for it, or stop it and run this again to resume)`,
    );
  }
  // Read again under the lock: a process that held it before may have gone on.
  const {
    rows: [row],
  } = await session.query<BackfillRow>(`select ${COLUMNS} from asset_webhooks.backfills where backfill_id = $1`, [
    backfill.backfillId,
  ]);
  return row!;
}

export async function unlockBackfill(session: pg.PoolClient, backfillId: number): Promise<void> {
  await releaseSessionLock(session, `backfill:${backfillId}`);
}

/** What one committed chunk adds to its backfill. */
export interface ChunkProgress {
  /** The id of the last asset read: every asset up to it is done once the chunk commits. */
  readonly lastAssetId: string;
  readonly assetsRead: number;
  readonly eventsSent: number;
  readonly excluded: number;
  readonly payloads: number;
  /** No asset after lastAssetId is left. */
  readonly completed: boolean;
}

/**
 * Advances the backfill by one chunk, in the chunk's transaction (the one that
 * writes its payloads and events). Refuses when the position is not the one
 * the chunk was read from: the chunk's assets would be sent twice.
 */
export async function recordChunk(
  client: pg.PoolClient,
  backfillId: number,
  readFrom: string | null,
  progress: ChunkProgress,
): Promise<void> {
  const { rowCount } = await client.query(
    `update asset_webhooks.backfills
     set last_asset_id = $3::bigint, assets_read = assets_read + $4, events_sent = events_sent + $5, excluded = excluded + $6,
         payloads = payloads + $7, updated_at = clock_timestamp(),
         status = case when $8 then 'completed' else status end, finished_at = case when $8 then clock_timestamp() end
     where backfill_id = $1 and status = 'running' and last_asset_id is not distinct from $2::bigint`,
    [
      backfillId,
      readFrom,
      progress.lastAssetId,
      progress.assetsRead,
      progress.eventsSent,
      progress.excluded,
      progress.payloads,
      progress.completed,
    ],
  );
  if (rowCount !== 1) {
    throw new Error(
      `backfill ${backfillId}: expected it running at asset ${readFrom ?? '(start)'}, but another process moved it; this chunk is rolled back`,
    );
  }
}

/** Marks a backfill with nothing left to read (its last chunk held no asset) as completed. */
export async function completeBackfill(client: pg.Pool | pg.PoolClient, backfillId: number): Promise<void> {
  await client.query(
    "update asset_webhooks.backfills set status = 'completed', finished_at = clock_timestamp(), updated_at = clock_timestamp() where backfill_id = $1 and status = 'running'",
    [backfillId],
  );
}
