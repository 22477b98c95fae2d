import type pg from 'pg';
import type { AssetState, DecimalId } from '../interfaces.js';

/**
 * A row of the binding's view asset_webhooks.asset_state, as node-postgres
 * returns it when selected with assetStateColumns: its bigints as text.
 */
export interface AssetStateRow {
  asset_id: DecimalId;
  asset_uuid: string;
  supertype: string;
  parent_id: DecimalId | null;
  state: string | null;
  schema_id: DecimalId | null;
  type_id: DecimalId | null;
  domain_id: DecimalId | null;
  latest_atom_id: DecimalId | null;
  keywords: string[];
  field_names: string[];
  field_values: string[];
}

/**
 * The columns every binding's asset_webhooks.asset_state view must have, with
 * their types (format_type spelling). The coalescer and `explain` read them by
 * name; other columns are allowed and ignored.
 */
export const ASSET_STATE_COLUMNS: ReadonlyArray<readonly [name: string, type: string]> = [
  ['asset_id', 'bigint'],
  ['asset_uuid', 'uuid'],
  ['supertype', 'text'],
  ['parent_id', 'bigint'],
  ['state', 'text'],
  ['schema_id', 'bigint'],
  ['type_id', 'bigint'],
  ['domain_id', 'bigint'],
  ['latest_atom_id', 'bigint'],
  ['keywords', 'text[]'],
  ['field_names', 'text[]'],
  ['field_values', 'text[]'],
];

/**
 * The column of the view that says whether the asset is in the Trash (true
 * while it is; false or null when it is not). `backfill` reads it, to send
 * only assets that are not in the Trash, and the coalescer, to exclude an
 * EDITED or REVERSION of an asset in the Trash (see ClaimedEvent.inTrash),
 * when the view has it: a binding installed before the column existed still
 * runs, and `explain` does not read it.
 */
export const IN_TRASH_COLUMN: readonly [name: string, type: string] = ['in_trash', 'boolean'];

/** Every column a binding's view must have: what the coalescer reads, and in_trash. `migrate --binding` refuses a view without one of them. */
export const BINDING_VIEW_COLUMNS: ReadonlyArray<readonly [name: string, type: string]> = [
  ...ASSET_STATE_COLUMNS,
  IN_TRASH_COLUMN,
];

/**
 * The select list of asset_state rows for a table alias: the view's bigints
 * as text, so that ids beyond 2^53 stay exact (see src/db/connect.ts).
 */
export function assetStateColumns(alias: string): string {
  return ASSET_STATE_COLUMNS.map(([name, type]) =>
    type === 'bigint' ? `${alias}.${name}::text as ${name}` : `${alias}.${name}`,
  ).join(', ');
}

/** The filters' view of one asset_state row (also used by the coalescer's claim). */
export function assetStateFromRow(row: AssetStateRow): AssetState {
  return {
    assetId: row.asset_id,
    assetUuid: row.asset_uuid,
    supertype: row.supertype,
    parentId: row.parent_id,
    state: row.state,
    schemaId: row.schema_id,
    typeId: row.type_id,
    domainId: row.domain_id,
    latestAtomId: row.latest_atom_id,
    keywords: row.keywords,
    fieldNames: row.field_names,
    fieldValues: row.field_values,
  };
}

/**
 * One asset's current state through the binding's view, or null when it does
 * not exist. For people reading it, keywords and fields are sorted (by name,
 * then value): the view gives them in no particular order, which the filters
 * do not mind.
 */
export async function readAssetState(pool: pg.Pool, assetId: DecimalId): Promise<AssetState | null> {
  const { rows } = await pool.query<AssetStateRow>(
    `select ${assetStateColumns('s')} from asset_webhooks.asset_state s where s.asset_id = $1::bigint`,
    [assetId],
  );
  const row = rows[0];
  if (!row) return null;
  const fields = row.field_names
    .map((name, i) => [name, row.field_values[i]!] as const)
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
