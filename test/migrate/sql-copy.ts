import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { sqlDirectory } from '../../src/migrate/sql-files.js';

/**
 * A copy of the project's sql/ folder in `directory`, for a test that changes
 * a function file and migrates with `sqlDirectory` pointing at the copy (the
 * project's own files are shared by every test file).
 */
export function copySql(directory: string): string {
  const root = path.join(directory, 'sql');
  cpSync(sqlDirectory, root, { recursive: true });
  return root;
}

/** Replaces `from` (which must occur exactly once) by `to` in the file `relative` of a copy. */
export function editSql(root: string, relative: string, from: string, to: string): void {
  const file = path.join(root, relative);
  const text = readFileSync(file, 'utf8');
  expect(text.split(from), `${relative} contains ${JSON.stringify(from)} exactly once`).toHaveLength(2);
  writeFileSync(file, text.replace(from, to));
}
