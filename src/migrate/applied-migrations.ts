import type pg from 'pg';
import { SchemaVersionError, UserError } from '../errors.js';
import type { Migration } from './sql-files.js';

/**
 * The migrator's bookkeeping: one row per applied migration, with the sha256
 * of the file's bytes as it was applied. Created by the migrator itself, as
 * asset_webhooks.routine_files is.
 */
export const MIGRATIONS_TABLE = `create table if not exists asset_webhooks.migrations (
  id integer primary key, name text not null, applied_at timestamptz not null default now(),
  checksum text not null)`;

/** A row of asset_webhooks.migrations; checksum null when the table has no such column (a pre-release build's). */
export interface AppliedMigration {
  readonly id: number;
  readonly name: string;
  readonly checksum: string | null;
}

/** The migrations recorded in schema asset_webhooks, in id order; none when it has no bookkeeping table. */
export async function readApplied(client: pg.Pool | pg.PoolClient): Promise<AppliedMigration[]> {
  // Two statements: one that names a column fails to parse when it does not exist.
  const {
    rows: [table],
  } = await client.query<{ present: boolean; checksums: boolean }>(
    `select to_regclass('asset_webhooks.migrations') is not null as present,
            exists (select from pg_attribute
                     where attrelid = to_regclass('asset_webhooks.migrations') and attname = 'checksum'
                       and not attisdropped) as checksums`,
  );
  if (!table?.present) return [];
  const { rows } = await client.query<AppliedMigration>(
    `select id, name, ${table.checksums ? 'checksum' : 'null::text as checksum'} from asset_webhooks.migrations order by id`,
  );
  return rows;
}

/** How to start afresh from a database that holds no release's schema. */
const START_AFRESH =
  'drop the schema (`drop schema asset_webhooks cascade`, which also removes the binding and its capture triggers) ' +
  'and run `asset-webhooks migrate --binding reference|FILE` again, or migrate into a fresh database';

/**
 * Refuses, before anything changes, a database whose applied migrations are
 * not this code's files:
 *   - the numbered migrations made before the first release, which the
 *     baseline replaced rather than continued (the same numbers name other
 *     files);
 *   - a baseline applied by a build made before the first release, which
 *     recorded no checksums: the baseline was still edited in place then, so
 *     its tables may differ from any release's;
 *   - a migration whose file has changed since it was applied (a released
 *     migration is never edited), named with both checksums.
 * A migration numbered after this code's last one is not refused here: it is
 * a newer release's, refused as such by the version checks.
 */
export function assertAppliedMatch(applied: readonly AppliedMigration[], migrations: readonly Migration[]): void {
  const codeVersion = Math.max(...migrations.map((m) => m.id));
  const byId = new Map(migrations.map((m) => [m.id, m]));
  const ours = applied.filter((row) => row.id <= codeVersion);
  const codeLatest = migrations[migrations.length - 1]!;
  if (ours.some((row) => byId.get(row.id)?.name !== row.name)) {
    const databaseLatest = applied[applied.length - 1]!;
    throw new SchemaVersionError(
      `schema asset_webhooks is at pre-release version ${databaseLatest.name}, which this code's schema version ${codeLatest.name} does not upgrade: ` +
        `expected a database migrated by a release; its pre-release data is not carried over, so ${START_AFRESH}`,
      databaseLatest.id,
      codeVersion,
    );
  }
  const unchecked = ours.find((row) => row.checksum === null);
  if (unchecked) {
    throw new SchemaVersionError(
      `schema asset_webhooks was migrated by a pre-release build of asset-webhooks (asset_webhooks.migrations records no checksum of ${unchecked.name}), ` +
        `whose tables may differ from any release's: expected a database migrated by a release; its pre-release data is not carried over, so ${START_AFRESH}`,
      applied[applied.length - 1]!.id,
      codeVersion,
    );
  }
  for (const row of ours) {
    const migration = byId.get(row.id)!;
    if (row.checksum === migration.checksum) continue;
    throw new UserError(
      'migration_changed',
      `${migration.file} is not the migration ${row.name} applied to this database: its checksum is ${short(migration.checksum)}, ` +
        `the one recorded when it was applied is ${short(row.checksum!)}. Expected the file as released: a released migration is never edited. ` +
        'Restore the file from the release that applied it; a change to the schema is a new migration after the last',
    );
  }
}

function short(checksum: string): string {
  return checksum.slice(0, 12);
}
