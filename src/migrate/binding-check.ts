import type pg from 'pg';
import { ASSET_STATE_COLUMNS, IN_TRASH_COLUMN } from '../db/asset-state.js';
import { UserError } from '../errors.js';

/**
 * What is wrong with the installed binding's view, one line per problem; empty
 * when nothing is. `columns`: those the caller reads (default: those the
 * coalescer and `explain` read; `migrate --binding` and `backfill` ask for
 * BINDING_VIEW_COLUMNS, in_trash included).
 */
export async function bindingProblems(
  client: pg.Pool | pg.PoolClient,
  columns: ReadonlyArray<readonly [name: string, type: string]> = ASSET_STATE_COLUMNS,
): Promise<string[]> {
  const { rows } = await client.query<{ name: string | null; type: string | null; exists: boolean }>(
    `select a.attname as name, format_type(a.atttypid, a.atttypmod) as type, v.oid is not null as exists
     from (select to_regclass('asset_webhooks.asset_state') as oid) v
     left join pg_attribute a on a.attrelid = v.oid and a.attnum > 0 and not a.attisdropped`,
  );
  if (!rows[0]?.exists) {
    return [
      'view asset_webhooks.asset_state: expected a binding to be installed, got none (run `asset-webhooks migrate --binding reference|FILE`)',
    ];
  }
  const actual = new Map(rows.map((row) => [row.name, row.type]));
  const problems: string[] = [];
  for (const [name, type] of columns) {
    const got = actual.get(name);
    if (got !== type)
      problems.push(
        `view asset_webhooks.asset_state, column ${name}: expected ${type}, got ${got ?? 'no such column'}` +
          (name === IN_TRASH_COLUMN[0] && got === undefined ? IN_TRASH_HINT : ''),
      );
  }
  return problems;
}

/** Said of a view without in_trash: a binding written before the column existed. */
const IN_TRASH_HINT =
  ' (true while the asset is in the Trash, which backfill needs: add it to the view, see docs/writing-a-binding.md, and run `asset-webhooks migrate --binding FILE` again)';

/** Refuses a database whose binding view is missing or does not have `columns` (default: those the service reads). */
export async function assertBinding(
  client: pg.Pool | pg.PoolClient,
  columns: ReadonlyArray<readonly [name: string, type: string]> = ASSET_STATE_COLUMNS,
): Promise<void> {
  const problems = await bindingProblems(client, columns);
  if (problems.length > 0)
    throw new UserError(
      problems.length === 1 && problems[0]!.includes('got none') ? 'binding_missing' : 'binding_invalid',
      problems,
    );
}

/**
 * Where the installed capture triggers would let a change through uncaptured,
 * one line per table and kind of gap; empty when none is found. A capture
 * trigger is recognised as a trigger whose function's source names
 * asset_webhooks.outbox (a binding whose triggers write it through a helper
 * function of their own is not checked). Warnings, not refusals: a binding
 * may have reasons of its own, and the service runs either way.
 */
export async function captureGaps(client: pg.Pool | pg.PoolClient): Promise<string[]> {
  const { rows } = await client.query<{ rel: string; tgname: string; tgenabled: string; on_truncate: boolean }>(
    `select t.tgrelid::regclass::text as rel, t.tgname, t.tgenabled, (t.tgtype & 32) <> 0 as on_truncate
     from pg_catalog.pg_trigger t
     join pg_catalog.pg_proc p on p.oid = t.tgfoid
     where not t.tgisinternal and p.prosrc like '%asset\\_webhooks.outbox%'
     order by 1, 2`,
  );
  if (rows.length === 0) {
    return [
      'capture triggers: expected triggers whose functions write to asset_webhooks.outbox, got none: no change of the assets is captured',
    ];
  }
  const gaps: string[] = [];
  for (const rel of [...new Set(rows.map((row) => row.rel))]) {
    const triggers = rows.filter((row) => row.rel === rel);
    // pg_trigger.tgenabled: O fires on origin (the default), A always, R in replica sessions only, D never.
    const names = (state: string): string =>
      triggers
        .filter((row) => row.tgenabled === state)
        .map((row) => row.tgname)
        .join(', ');
    const disabled = names('D');
    if (disabled)
      gaps.push(
        `table ${rel}, capture triggers ${disabled}: expected enabled, got disabled: the changes they would capture are lost (ALTER TABLE ... ENABLE ALWAYS TRIGGER)`,
      );
    const replicaOnly = names('R');
    if (replicaOnly)
      gaps.push(
        `table ${rel}, capture triggers ${replicaOnly}: expected to fire always, got in replica sessions only: ordinary changes are not captured (ALTER TABLE ... ENABLE ALWAYS TRIGGER)`,
      );
    const originOnly = names('O');
    if (originOnly) {
      gaps.push(
        `table ${rel}, capture triggers ${originOnly}: expected to fire always, got on origin only: ` +
          'changes made with session_replication_role = replica (bulk loads) are not captured (ALTER TABLE ... ENABLE ALWAYS TRIGGER)',
      );
    }
    if (!triggers.some((row) => row.on_truncate)) {
      gaps.push(`table ${rel}: expected a BEFORE TRUNCATE capture trigger, got none: a TRUNCATE of it is not captured`);
    }
  }
  return gaps;
}
