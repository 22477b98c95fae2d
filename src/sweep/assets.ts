import type pg from 'pg';
import { assetStateColumns, type AssetStateRow } from '../db/asset-state.js';
import { eventTimestampText } from '../db/event-timestamp.js';

/** An asset as a sweep reads it from the binding's asset_state view. */
export interface SweptAsset extends AssetStateRow {
  /** Its id as a decimal string: asset ids may exceed 2^53. */
  asset_key: string;
  /** When it was read, formatted as eventTimestamps are. */
  read_at: string;
  in_trash: boolean | null;
}

/**
 * The keyset chunk of a sweep over assets: the next `limit` assets after
 * `after` in ascending asset_id (of the listed ones, when `listed` is not
 * null). The binding's view is read by its key, so each read costs the
 * chunk, not the table, and memory holds one chunk whatever the number of
 * assets.
 */
export async function readAssetChunk(
  client: pg.PoolClient,
  after: string | null,
  listed: readonly string[] | null,
  limit: number,
): Promise<SweptAsset[]> {
  const parameters: unknown[] = [limit];
  const conditions: string[] = [];
  if (after !== null) conditions.push(`s.asset_id > $${parameters.push(after)}::bigint`);
  if (listed !== null) conditions.push(`s.asset_id = any($${parameters.push(listed)}::bigint[])`);
  const { rows } = await client.query<SweptAsset>(
    `select ${assetStateColumns('s')}, s.asset_id::text as asset_key, s.in_trash,
            ${eventTimestampText('statement_timestamp()')} as read_at
     from asset_webhooks.asset_state s
     ${conditions.length === 0 ? '' : `where ${conditions.join(' and ')}`}
     order by s.asset_id
     limit $1`,
    parameters,
  );
  return rows;
}
