import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The project's sql/ folder; src/ and dist/ are at the same depth below the root. */
export const sqlDirectory = fileURLToPath(new URL('../../sql/', import.meta.url));

export interface Migration {
  /** The number in the file name: 0001_baseline.sql is migration 1. */
  readonly id: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * The migrations under sql/migrations, in order: the baseline, which creates
 * the whole schema, then the forward-only numbered files after it, each
 * recorded in CHANGELOG.md.
 */
export function loadMigrations(): Migration[] {
  const dir = path.join(sqlDirectory, 'migrations');
  return readdirSync(dir)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      id: Number(file.slice(0, 4)),
      name: file.replace(/\.sql$/, ''),
      sql: readFileSync(path.join(dir, file), 'utf8'),
    }));
}

/** The schema version this code expects: the highest migration id. */
export function codeSchemaVersion(): number {
  return Math.max(...loadMigrations().map((m) => m.id));
}

/** The path of the reference binding shipped with the project. */
export const referenceBindingPath = path.join(sqlDirectory, 'bindings', 'reference.sql');
