import type pg from 'pg';
import type { SweptEvent } from '../sweep/events.js';

/**
 * The assets of `events` that, read now, no longer exist (asset_gone) or are
 * in the Trash (in_trash), by asset id.
 */
export async function changedSinceRead(
  client: pg.PoolClient,
  events: readonly SweptEvent[],
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
