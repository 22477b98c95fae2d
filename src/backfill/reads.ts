import type pg from 'pg';
import { assetStateColumns, type AssetStateRow } from '../db/asset-state.js';
import type { BackfillEvent } from '../payloads/events.js';

/** An asset as a backfill reads it from the binding's asset_state view. */
export interface ReadRow extends AssetStateRow {
  asset_key: string;
  read_at: string;
  in_trash: boolean | null;
}

/**
 * The next assets after `after` in ascending asset_id, with the time they were
 * read (formatted as eventTimestamps are). The binding's view is read by its
 * key, so each read costs the chunk, not the table.
 */
export async function readAssets(
  client: pg.PoolClient,
  after: string | null,
  listed: readonly string[] | null,
  limit: number,
): Promise<ReadRow[]> {
  const parameters: unknown[] = [limit];
  const conditions: string[] = [];
  if (after !== null) conditions.push(`s.asset_id > $${parameters.push(after)}::bigint`);
  if (listed !== null) conditions.push(`s.asset_id = any($${parameters.push(listed)}::bigint[])`);
  const { rows } = await client.query<ReadRow>(
    `select ${assetStateColumns('s')}, s.asset_id::text as asset_key, s.in_trash,
            to_char(statement_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as read_at
     from asset_webhooks.asset_state s
     ${conditions.length === 0 ? '' : `where ${conditions.join(' and ')}`}
     order by s.asset_id
     limit $1`,
    parameters,
  );
  return rows;
}

/**
 * The assets of `events` that, read now, no longer exist (asset_gone) or are
 * in the Trash (in_trash), by asset id.
 */
export async function changedSinceRead(
  client: pg.PoolClient,
  events: readonly BackfillEvent[],
): Promise<Map<string, string>> {
  if (events.length === 0) return new Map();
  const { rows } = await client.query<{ id: string; check: string }>(
    `select g.id::text as id, case when s.asset_id is null then 'asset_gone' else 'in_trash' end as check
     from unnest($1::bigint[]) as g(id)
     left join asset_webhooks.asset_state s on s.asset_id = g.id
     where s.asset_id is null or s.in_trash`,
    [events.map((event) => event.assetId)],
  );
  return new Map(rows.map((row) => [row.id, row.check]));
}

/** The listed assets that do not exist: the first 100 and how many. */
export async function missingAssets(
  client: pg.PoolClient,
  listed: readonly string[],
): Promise<{ ids: string[]; count: number }> {
  const { rows } = await client.query<{ id: string; count: number }>(
    `select m.id::text as id, (count(*) over ())::int as count
     from unnest($1::bigint[]) as m(id)
     where not exists (select 1 from asset_webhooks.asset_state s where s.asset_id = m.id)
     order by m.id limit 100`,
    [listed],
  );
  return { ids: rows.map((row) => row.id), count: rows[0]?.count ?? 0 };
}
