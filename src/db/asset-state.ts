import type pg from 'pg';
import type { AssetState } from '../interfaces.js';

/** A row of the binding's view asset_webhooks.asset_state, as node-postgres returns it. */
export interface AssetStateRow {
  asset_id: number;
  asset_uuid: string;
  supertype: string;
  parent_id: number | null;
  state: string | null;
  schema_id: number | null;
  type_id: number | null;
  domain_id: number | null;
  latest_atom_id: number | null;
  keywords: string[];
  field_names: string[];
  field_values: string[];
}

/** The filters' view of one asset_state row (also used by the coalescer's claim). */
export function assetStateFromRow(row: AssetStateRow): AssetState {
  return {
    assetId: row.asset_id, assetUuid: row.asset_uuid, supertype: row.supertype, parentId: row.parent_id, state: row.state,
    schemaId: row.schema_id, typeId: row.type_id, domainId: row.domain_id, latestAtomId: row.latest_atom_id,
    keywords: row.keywords, fieldNames: row.field_names, fieldValues: row.field_values,
  };
}

/**
 * One asset's current state through the binding's view, or null when it does
 * not exist. For people reading it, keywords and fields are sorted (by name,
 * then value): the view gives them in no particular order, which the filters
 * do not mind.
 */
export async function readAssetState(pool: pg.Pool, assetId: number): Promise<AssetState | null> {
  const { rows } = await pool.query<AssetStateRow>('select * from asset_webhooks.asset_state where asset_id = $1', [assetId]);
  const row = rows[0];
  if (!row) return null;
  const fields = row.field_names.map((name, i) => [name, row.field_values[i]!] as const)
    .sort(([a, x], [b, y]) => compare(a, b) || compare(x, y));
  return assetStateFromRow({
    ...row,
    keywords: [...row.keywords].sort(),
    field_names: fields.map(([name]) => name),
    field_values: fields.map(([, value]) => value),
  });
}

/** JavaScript's default string order (as `sort()` uses): the same on every machine, whatever the database's collation. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
