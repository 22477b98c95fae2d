import type pg from 'pg';
import { UserError } from '../errors.js';
import { describeError } from '../db/connect.js';
import { routineDigest, type RoutineFile } from './sql-files.js';
import { unrecreatedDependents } from './routine-dependents.js';

/**
 * The files of sql/functions and sql/dependents that the last `migrate`
 * applied, with their digests. Created by the migrator itself, as
 * asset_webhooks.migrations is.
 */
export const ROUTINE_FILES_TABLE = `create table if not exists asset_webhooks.routine_files (
  path text primary key, digest text not null, applied_at timestamptz not null default now())`;

/**
 * Errors of a file that names an object a later file creates (a function that
 * returns a view's rows, before the view; a view before a function it calls):
 * the file is tried again once the others have run.
 */
const NOT_CREATED_YET = new Set(['42P01', '42704', '42883']);

/**
 * Errors of a CREATE OR REPLACE that cannot replace what exists: a function
 * whose result type, parameter names or defaults changed, or that changes
 * kind (42P13, 42809); a view whose columns changed (42P16). The object is
 * dropped and created again.
 */
const CANNOT_REPLACE = new Set(['42P13', '42809', '42P16']);

/**
 * Applies every function and dependent file in the caller's transaction and
 * records them in asset_webhooks.routine_files. Files run in their order
 * (sql/functions, then sql/dependents, each by name) with
 * check_function_bodies off, so a function may call one created after it;
 * a file that names an object not created yet is tried again after the
 * others.
 *
 * A function keeps its identity (its oid, and so every view, default and
 * prepared plan that refers to it) as long as its file keeps its name,
 * parameter types and result. When these change, the old function is
 * dropped, and everything that depends on it with it, but only when all of
 * that is recreated by these files (their functions, views and defaults);
 * otherwise the migration is refused and nothing changes. The same holds for
 * the function or view of a file that was removed. Each file creates one
 * function, named as the file: overloads are not supported.
 */
export async function applyRoutines(client: pg.PoolClient, files: readonly RoutineFile[]): Promise<void> {
  await client.query('set local check_function_bodies = off');
  const { rows: recorded } = await client.query<{ path: string }>('select path from asset_webhooks.routine_files');
  const current = new Set(files.map((file) => file.path));
  let dropped = false;
  for (const { path } of recorded) {
    if (current.has(path)) continue;
    const match = /^(functions|dependents)\/([a-z0-9_]+)\.sql$/.exec(path);
    if (match)
      dropped =
        (await dropObject(client, match[1] === 'functions' ? 'function' : 'dependent', match[2]!, files, path)) ||
        dropped;
  }
  dropped = (await applyAll(client, files)) || dropped;
  // A drop cascades to the objects that depend on it: created again here.
  if (dropped) await applyAll(client, files);
  await client.query('delete from asset_webhooks.routine_files');
  await client.query(
    'insert into asset_webhooks.routine_files (path, digest) select * from unnest($1::text[], $2::text[])',
    [files.map((file) => file.path), files.map((file) => file.digest)],
  );
}

/** The digest of the files the last `migrate` applied; null when none is recorded. */
export async function readRoutineDigest(client: pg.Pool | pg.PoolClient): Promise<string | null> {
  const {
    rows: [table],
  } = await client.query<{ present: boolean }>(
    "select to_regclass('asset_webhooks.routine_files') is not null as present",
  );
  if (!table?.present) return null;
  const { rows } = await client.query<{ path: string; digest: string }>(
    'select path, digest from asset_webhooks.routine_files',
  );
  return rows.length === 0 ? null : routineDigest(rows);
}

/** Runs every file once; true when an object had to be dropped to replace it. */
async function applyAll(client: pg.PoolClient, files: readonly RoutineFile[]): Promise<boolean> {
  let dropped = false;
  let pending = [...files];
  while (pending.length > 0) {
    const waiting: Array<{ file: RoutineFile; error: unknown }> = [];
    for (const file of pending) {
      const before = file.kind === 'function' ? await functionsNamed(client, file.name) : [];
      let error = await trySql(client, file.sql);
      if (error !== undefined && NOT_CREATED_YET.has(codeOf(error))) {
        waiting.push({ file, error });
        continue;
      }
      if (error !== undefined && CANNOT_REPLACE.has(codeOf(error))) {
        dropped = (await dropObject(client, file.kind, file.name, files, file.path)) || dropped;
        error = await trySql(client, file.sql);
      }
      if (error !== undefined) throw fileError(file, error);
      if (file.kind === 'function') {
        const after = await functionsNamed(client, file.name);
        if (after.length === 0)
          throw new UserError(
            'routine_failed',
            `sql/${file.path}: expected it to create function asset_webhooks.${file.name}, got none by that name`,
          );
        // A new oid: the file's function has a new identity, and the old one is stale.
        if (after.some((oid) => !before.includes(oid))) {
          for (const oid of before.filter((old) => after.includes(old)))
            dropped = (await dropFunction(client, oid, files, file.path)) || dropped;
        }
      }
    }
    if (waiting.length === pending.length) throw fileError(waiting[0]!.file, waiting[0]!.error);
    pending = waiting.map((entry) => entry.file);
  }
  return dropped;
}

/** Runs `sql` in a savepoint; its error, rolled back, or undefined. */
async function trySql(client: pg.PoolClient, sql: string): Promise<unknown> {
  await client.query('savepoint routine_file');
  try {
    await client.query(sql);
    await client.query('release savepoint routine_file');
    return undefined;
  } catch (error) {
    await client.query('rollback to savepoint routine_file');
    return error;
  }
}

async function functionsNamed(client: pg.PoolClient, name: string): Promise<number[]> {
  const { rows } = await client.query<{ oid: number }>(
    `select p.oid from pg_catalog.pg_proc p
     where p.pronamespace = 'asset_webhooks'::regnamespace and p.proname = $1 order by p.oid`,
    [name],
  );
  return rows.map((row) => row.oid);
}

/** Drops the function(s) or the view of a file's name; true when something was dropped. */
async function dropObject(
  client: pg.PoolClient,
  kind: RoutineFile['kind'],
  name: string,
  files: readonly RoutineFile[],
  path: string,
): Promise<boolean> {
  if (kind === 'function') {
    let dropped = false;
    for (const oid of await functionsNamed(client, name))
      dropped = (await dropFunction(client, oid, files, path)) || dropped;
    return dropped;
  }
  const {
    rows: [view],
  } = await client.query<{ oid: number | null }>(
    `select c.oid from pg_catalog.pg_class c
     where c.relnamespace = 'asset_webhooks'::regnamespace and c.relname = $1 and c.relkind = 'v'`,
    [name],
  );
  if (!view?.oid) return false;
  await assertRecreated(client, 'pg_class', view.oid, files, path);
  await client.query(`drop view asset_webhooks.${quoteIdent(name)} cascade`);
  return true;
}

async function dropFunction(
  client: pg.PoolClient,
  oid: number,
  files: readonly RoutineFile[],
  path: string,
): Promise<boolean> {
  await assertRecreated(client, 'pg_proc', oid, files, path);
  const {
    rows: [row],
  } = await client.query<{ signature: string }>('select $1::oid::regprocedure::text as signature', [oid]);
  await client.query(`drop function ${row!.signature} cascade`);
  return true;
}

/** Refuses to drop an object when something these files do not recreate depends on it. */
async function assertRecreated(
  client: pg.PoolClient,
  catalog: 'pg_proc' | 'pg_class',
  oid: number,
  files: readonly RoutineFile[],
  path: string,
): Promise<void> {
  const others = await unrecreatedDependents(client, catalog, oid, files);
  if (others.length === 0) return;
  const { rows } = await client.query<{ what: string }>(`select pg_describe_object($1::regclass, $2, 0) as what`, [
    catalog,
    oid,
  ]);
  throw new UserError(
    'routine_in_use',
    `sql/${path}: expected to drop ${rows[0]!.what} to create it anew (its signature or columns changed, or its file is gone), ` +
      `got objects that depend on it and that migrate does not recreate: ${others.join('; ')} ` +
      '(drop or change them first; no function was changed)',
  );
}

function codeOf(error: unknown): string {
  return String((error as { code?: unknown }).code ?? '');
}

function fileError(file: RoutineFile, error: unknown): UserError {
  return new UserError('routine_failed', `sql/${file.path}: expected SQL that runs, got ${describeError(error)}`, {
    cause: error,
  });
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
