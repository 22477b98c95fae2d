import { runMigrations } from 'graphile-worker';
import type pg from 'pg';
import { SchemaVersionError, UserError } from '../errors.js';
import { describeError } from '../db/connect.js';
import { inTransaction } from '../db/transaction.js';
import { releaseSessionLock, SESSION_LOCKS_TABLE, takeSessionLock } from '../db/session-lock.js';
import { BINDING_VIEW_COLUMNS } from '../db/asset-state.js';
import { SCHEMA_CHANGED_CHANNEL } from '../db/payloads-ready.js';
import { QUOTED_PREFIX_LENGTH, quotedPrefix } from '../text/printable.js';
import { assertAppliedMatch, MIGRATIONS_TABLE, readApplied } from './applied-migrations.js';
import { assertBinding, captureGaps } from './binding-check.js';
import { readBindingFile } from './binding-file.js';
import { applyRoutines, readRoutineDigest, ROUTINE_FILES_TABLE } from './routines.js';
import { codeSchemaVersion, loadMigrations, loadRoutineFiles, routineDigest, sqlDirectory } from './sql-files.js';

/**
 * Serialises every `migrate` against one database: two runs at once wait for
 * each other instead of racing on CREATE statements. A session lock (a row of
 * asset_webhooks.session_locks): an advisory key could be held by any role.
 */
const MIGRATE_LOCK = 'migrate';

export interface MigrateOptions {
  /** `reference`, the path of a binding SQL file, or undefined for none. */
  readonly binding?: string | undefined;
  /** The folder whose migrations, functions and dependents are applied; default: the project's sql/. */
  readonly sqlDirectory?: string | undefined;
}

export interface MigrateResult {
  readonly applied: string[];
  readonly schemaVersion: number;
  /** The digest of the function and dependent files applied (routineDigest). */
  readonly functionsDigest: string;
  readonly binding?: string;
  /** Where the installed capture triggers let changes through (see captureGaps); only when a binding was applied. */
  readonly captureGaps?: string[];
}

/**
 * Creates or upgrades schema asset_webhooks and graphile-worker's schema, then
 * applies the binding if one is given. Each migration runs in one transaction
 * together with its bookkeeping row; then every file of sql/functions and
 * sql/dependents runs, on every run, in one transaction of its own (see
 * applyRoutines). The whole run holds a session lock (src/db/session-lock.ts), so
 * it is safe to run twice, concurrently and while workers run. A schema left
 * by a pre-release build, or whose applied migrations differ from their files
 * (each is recorded with its checksum), is refused before anything changes
 * (assertAppliedMatch).
 */
export async function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrateResult> {
  // Read the binding first: an unreadable file must fail before anything changes.
  const bindingSql = options.binding === undefined ? undefined : await readBinding(options.binding);
  const root = options.sqlDirectory ?? sqlDirectory;
  const migrations = loadMigrations(root);
  const routines = loadRoutineFiles(root);
  const codeVersion = Math.max(...migrations.map((m) => m.id));
  const client = await pool.connect();
  const applied: string[] = [];
  let gaps: string[] = [];
  try {
    // The lock is a row of the schema: what holds it comes first, raced for.
    await createBookkeeping(client);
    await takeSessionLock(client, MIGRATE_LOCK, { waitMs: Infinity });
    try {
      const databaseVersion = await readSchemaVersion(client);
      assertAppliedMatch(await readApplied(client), migrations);
      if (databaseVersion > codeVersion) {
        throw versionMismatch(
          databaseVersion,
          codeVersion,
          'expected a release of asset-webhooks at least as new as the one that migrated the database',
        );
      }
      for (const migration of migrations) {
        if (migration.id <= databaseVersion) continue;
        await inShortLockTries(client, async () => {
          await client.query(migration.sql);
          await client.query('insert into asset_webhooks.migrations (id, name, checksum) values ($1, $2, $3)', [
            migration.id,
            migration.name,
            migration.checksum,
          ]);
        });
        applied.push(migration.name);
      }
      // After the migrations, whose tables and views the functions name; before
      // the binding, whose triggers call record_capture_error.
      await inShortLockTries(client, () => applyRoutines(client, routines));
      // graphile-worker migrates its own schema, under its own lock.
      await runMigrations({ pgPool: pool });
      if (bindingSql !== undefined) {
        // Checked before it commits: a binding whose view the service cannot read is rolled back.
        await inShortLockTries(client, async () => {
          await runBindingSql(client, bindingSql);
          await assertBinding(client, BINDING_VIEW_COLUMNS);
        });
      }
    } finally {
      await releaseSessionLock(client, MIGRATE_LOCK);
    }
    if (bindingSql !== undefined) gaps = await captureGaps(client);
    // After every commit: `run` processes of another release stop claiming at once (src/service/schema-watch.ts).
    await client.query("select pg_notify($1, '')", [SCHEMA_CHANGED_CHANNEL]);
  } finally {
    client.release();
  }
  return {
    applied,
    schemaVersion: codeVersion,
    functionsDigest: routineDigest(routines),
    ...(bindingSql ? { binding: bindingSql.name, captureGaps: gaps } : {}),
  };
}

/**
 * Creates the schema and the tables of migrate's own bookkeeping, the lock's
 * among them, where they do not exist. Two first runs at once may both try to
 * create one: the one that loses (a unique violation on the catalog, or
 * "already exists") tries again, and then finds it. Each loss is an object the
 * other run created, so the tries are bounded by the objects times the runs.
 */
async function createBookkeeping(client: pg.PoolClient): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await client.query('create schema if not exists asset_webhooks');
      await client.query(MIGRATIONS_TABLE);
      await client.query(ROUTINE_FILES_TABLE);
      await client.query(SESSION_LOCKS_TABLE);
      return;
    } catch (error) {
      const code = (error as { code?: string }).code;
      // 42710: the table's row type, created first, "already exists" (duplicate_object).
      if (attempt >= 20 || !['23505', '42P06', '42P07', '42710'].includes(code ?? '')) throw error;
    }
  }
}

/** How long one try of a migration waits for a lock, and how long all tries may take. */
const LOCK_TRY_MS = 2000;
const LOCK_TRIES_MS = 10 * 60_000;

/**
 * Runs `work` in a transaction whose lock waits end after LOCK_TRY_MS, and
 * tries again until it gets its locks. A coalescing run holds light locks on
 * the outbox, the asset tables and the binding's view for its whole duration
 * (its snapshot); a migration waiting behind it for a stronger lock would make
 * every write of the application queue behind the migration. With short tries
 * the application waits at most LOCK_TRY_MS at a time.
 */
async function inShortLockTries(client: pg.PoolClient, work: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + LOCK_TRIES_MS;
  for (let attempt = 1; ; attempt += 1) {
    try {
      await inTransaction(client, async () => {
        await client.query(`set local lock_timeout = '${LOCK_TRY_MS}ms'`);
        await work();
      });
      return;
    } catch (error) {
      const cause = (error as { cause?: unknown }).cause ?? error;
      if ((cause as { code?: string }).code !== '55P03' || Date.now() > deadline) throw error;
      if (attempt === 1)
        process.stderr.write(
          'migrate: waiting for locks held by a coalescing run or another session; trying again every few seconds\n',
        );
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/**
 * Runs a binding's SQL; an error in it is the user's, named with its file and line.
 *
 * The file runs through EXECUTE in a function of this session, not as a query
 * of its own: a COMMIT or ROLLBACK written in the file would otherwise end the
 * migration's transaction halfway through the file and leave the part before
 * it installed. Through EXECUTE, PostgreSQL refuses transaction commands, and
 * the statements still run one after the other, each planned when it runs.
 */
/**
 * PostgreSQL's error with every double-quoted fragment cut to a short escaped
 * excerpt: a syntax error quotes the binding from where it failed (`at or near
 * "…"`), up to the end of the file for an unterminated string, and the file
 * may not be SQL at all.
 */
function excerptsOnly(message: string): string {
  return message.replace(/"([^"]*)("|$)/g, (whole, inner: string) =>
    inner.length > QUOTED_PREFIX_LENGTH ? quotedPrefix(inner) : whole,
  );
}

async function runBindingSql(client: pg.PoolClient, binding: { name: string; sql: string }): Promise<void> {
  await client.query(
    'create or replace function pg_temp.asset_webhooks_run_binding(sql text) returns void language plpgsql as $f$ begin execute sql; end $f$',
  );
  try {
    await client.query('select pg_temp.asset_webhooks_run_binding($1)', [binding.sql]);
    await client.query('drop function pg_temp.asset_webhooks_run_binding(text)');
  } catch (error) {
    // The position of a statement run by EXECUTE is reported as the internal one.
    const { position, internalPosition } = error as { position?: unknown; internalPosition?: unknown };
    const offset = Number(position ?? internalPosition);
    const line =
      Number.isInteger(offset) && offset > 0 ? `, line ${binding.sql.slice(0, offset - 1).split('\n').length}` : '';
    throw new UserError(
      'binding_failed',
      `--binding ${binding.name}: expected SQL that runs on this database, got an error${line}: ${excerptsOnly(describeError(error))} (nothing of the binding was installed)`,
      { cause: error },
    );
  }
}

/** The binding's SQL, read as binding-file.ts says (a regular file of bounded size that does not look like a secret). */
async function readBinding(binding: string): Promise<{ name: string; sql: string }> {
  return readBindingFile(binding);
}

/** The highest applied migration, 0 when schema asset_webhooks has none. */
export async function readSchemaVersion(client: pg.Pool | pg.PoolClient): Promise<number> {
  // Two statements: one that names the table fails to parse when the table
  // does not exist, even in a branch that would not run.
  const {
    rows: [table],
  } = await client.query<{ present: boolean }>(
    "select to_regclass('asset_webhooks.migrations') is not null as present",
  );
  if (!table?.present) return 0;
  const { rows } = await client.query<{ version: number }>(
    'select coalesce(max(id), 0)::int as version from asset_webhooks.migrations',
  );
  return rows[0]?.version ?? 0;
}

/** A schema at another version than the code's, in one line that names both and says what to do. */
function versionMismatch(databaseVersion: number, codeVersion: number, advice: string): SchemaVersionError {
  const relation = databaseVersion > codeVersion ? 'newer' : 'older';
  return new SchemaVersionError(
    `schema asset_webhooks is at version ${databaseVersion}, ${relation} than this code's version ${codeVersion}: ${advice}`,
    databaseVersion,
    codeVersion,
  );
}

/** The digest of this code's function files, read once: readiness checks the schema at every probe. */
let codeRoutineDigest: string | undefined;

/**
 * Refuses to work against a database whose schema is older (run `migrate`) or
 * newer (upgrade this code) than the code, or left by a pre-release build, or
 * whose applied migrations differ from this code's files, or whose functions were applied from other files than this code's.
 */
export async function assertSchemaCurrent(pool: pg.Pool): Promise<void> {
  assertAppliedMatch(await readApplied(pool), loadMigrations());
  const codeVersion = codeSchemaVersion();
  const databaseVersion = await readSchemaVersion(pool);
  if (databaseVersion < codeVersion) {
    throw versionMismatch(databaseVersion, codeVersion, 'run `asset-webhooks migrate` first');
  }
  if (databaseVersion > codeVersion) {
    throw versionMismatch(
      databaseVersion,
      codeVersion,
      'upgrade asset-webhooks before running it against this database',
    );
  }
  codeRoutineDigest ??= routineDigest(loadRoutineFiles());
  const codeDigest = codeRoutineDigest;
  const databaseDigest = await readRoutineDigest(pool);
  if (databaseDigest !== codeDigest) {
    throw new UserError(
      'schema_functions',
      `schema asset_webhooks has the functions of digest ${databaseDigest ?? 'none'}, not this code's digest ${codeDigest}: ` +
        'run `asset-webhooks migrate` with this release first, unless a newer release migrated it: then run that release',
    );
  }
}
