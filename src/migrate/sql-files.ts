import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The project's sql/ folder; src/ and dist/ are at the same depth below the root. */
export const sqlDirectory = fileURLToPath(new URL('../../sql/', import.meta.url));

export interface Migration {
  /** The number in the file name: 0001_baseline.sql is migration 1. */
  readonly id: number;
  readonly name: string;
  /** Its path: what a refusal names. */
  readonly file: string;
  readonly sql: string;
  /** sha256 of the file's bytes, in hex: recorded in asset_webhooks.migrations when it is applied. */
  readonly checksum: string;
}

/**
 * The migrations under sql/migrations, in order: the baseline, which creates
 * the schema's tables, views and indexes, then the forward-only numbered
 * files after it, each recorded in CHANGELOG.md. The functions are not
 * migrations: see loadRoutineFiles.
 */
export function loadMigrations(root: string = sqlDirectory): Migration[] {
  const dir = path.join(root, 'migrations');
  return readdirSync(dir)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => {
      const bytes = readFileSync(path.join(dir, file));
      return {
        id: Number(file.slice(0, 4)),
        name: file.replace(/\.sql$/, ''),
        file: path.join(dir, file),
        sql: bytes.toString('utf8'),
        checksum: createHash('sha256').update(bytes).digest('hex'),
      };
    });
}

/** The schema version this code expects: the highest migration id. */
export function codeSchemaVersion(): number {
  return Math.max(...loadMigrations().map((m) => m.id));
}

/** The path of the reference binding shipped with the project. */
export const referenceBindingPath = path.join(sqlDirectory, 'bindings', 'reference.sql');

/** A file of sql/functions or sql/dependents, applied by every `migrate`. */
export interface RoutineFile {
  /** Relative to the sql/ folder, with forward slashes: `functions/claim_payloads.sql`. */
  readonly path: string;
  readonly kind: 'function' | 'dependent';
  /** The file name without `.sql`: the function or view it creates. */
  readonly name: string;
  readonly sql: string;
  /** sha256 of the file's bytes, in hex. */
  readonly digest: string;
}

/**
 * The files of sql/functions, then those of sql/dependents, each folder in
 * file-name order (see sql/functions/README.md).
 */
export function loadRoutineFiles(root: string = sqlDirectory): RoutineFile[] {
  const read = (folder: string, kind: RoutineFile['kind']): RoutineFile[] => {
    const dir = path.join(root, folder);
    return readdirSync(dir)
      .filter((file) => /^[a-z0-9_]+\.sql$/.test(file))
      .sort()
      .map((file) => {
        const bytes = readFileSync(path.join(dir, file));
        return {
          path: `${folder}/${file}`,
          kind,
          name: file.replace(/\.sql$/, ''),
          sql: bytes.toString('utf8'),
          digest: createHash('sha256').update(bytes).digest('hex'),
        };
      });
  };
  return [...read('functions', 'function'), ...read('dependents', 'dependent')];
}

/**
 * One digest of a set of files, from their paths and digests: what `migrate`
 * records and what `run` compares with its own files. Twelve hex digits, as
 * short as a line that names two of them can afford.
 */
export function routineDigest(files: ReadonlyArray<{ path: string; digest: string }>): string {
  const lines = [...files]
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map((file) => `${file.path} ${file.digest}\n`)
    .join('');
  return createHash('sha256').update(lines).digest('hex').slice(0, 12);
}
