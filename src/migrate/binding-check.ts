import type pg from 'pg';
import { UserError } from '../errors.js';

/**
 * The columns every binding's asset_webhooks.asset_state view must have, with
 * their types (format_type spelling). The coalescer and `explain` read them by
 * name; other columns are allowed and ignored.
 */
export const ASSET_STATE_COLUMNS: ReadonlyArray<readonly [name: string, type: string]> = [
  ['asset_id', 'bigint'], ['asset_uuid', 'uuid'], ['supertype', 'text'], ['parent_id', 'bigint'], ['state', 'text'],
  ['schema_id', 'bigint'], ['type_id', 'bigint'], ['domain_id', 'bigint'], ['latest_atom_id', 'bigint'],
  ['keywords', 'text[]'], ['field_names', 'text[]'], ['field_values', 'text[]'],
];

/** What is wrong with the installed binding's view, one line per problem; empty when nothing is. */
export async function bindingProblems(client: pg.Pool | pg.PoolClient): Promise<string[]> {
  const { rows } = await client.query<{ name: string | null; type: string | null; exists: boolean }>(
    `select a.attname as name, format_type(a.atttypid, a.atttypmod) as type, v.oid is not null as exists
     from (select to_regclass('asset_webhooks.asset_state') as oid) v
     left join pg_attribute a on a.attrelid = v.oid and a.attnum > 0 and not a.attisdropped`);
  if (!rows[0]?.exists) {
    return ['view asset_webhooks.asset_state: expected a binding to be installed, got none (run `asset-webhooks migrate --binding reference|FILE`)'];
  }
  const actual = new Map(rows.map((row) => [row.name, row.type]));
  const problems: string[] = [];
  for (const [name, type] of ASSET_STATE_COLUMNS) {
    const got = actual.get(name);
    if (got !== type) problems.push(`view asset_webhooks.asset_state, column ${name}: expected ${type}, got ${got ?? 'no such column'}`);
  }
  return problems;
}

/** Refuses a database whose binding view is missing or does not have the columns the service reads. */
export async function assertBinding(client: pg.Pool | pg.PoolClient): Promise<void> {
  const problems = await bindingProblems(client);
  if (problems.length > 0) throw new UserError(problems.length === 1 && problems[0]!.includes('got none') ? 'binding_missing' : 'binding_invalid', problems);
}
