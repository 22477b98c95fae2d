import type pg from 'pg';
import type { SweepRecord } from '../sweep/record.js';

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
  /** The assets excluded, by the check that excluded them; its values add up to excluded. */
  readonly excludedBy: Readonly<Record<string, number>>;
}

/** The columns a backfill's chunk sets (recordSweepChunk). */
export const BACKFILL_RECORD: SweepRecord = {
  kind: 'backfill',
  columns: {
    last_asset_id: 'bigint',
    assets_read: 'bigint',
    events_sent: 'bigint',
    excluded: 'bigint',
    payloads: 'bigint',
    excluded_by: 'jsonb',
  },
};

/** asset_webhooks.backfills.assets_key of the listed assets ($2, ascending and distinct; null for every asset). */
const ASSETS_KEY = "coalesce(md5(array_to_string($2::bigint[], ',')), 'all')";

const COLUMNS = `backfill_id as "backfillId", webhook_id as "webhookId", status, last_asset_id::text as "lastAssetId",
  assets_read::float8 as "assetsRead", events_sent::float8 as "eventsSent", excluded::float8 as "excluded",
  payloads::float8 as "payloads", excluded_by as "excludedBy"`;

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
 * backfill is never resumed. Run under the webhook's backfill lock.
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
  // Completed between the insert and the read by a process of an earlier release: start afresh.
  if (!running) return startOrResumeBackfill(client, webhookId, assetIds, requestedBy);
  return { backfill: running, resumed: true };
}
