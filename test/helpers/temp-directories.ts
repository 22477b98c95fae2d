import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

/**
 * Call at the top of a test file (or a describe block): returns a function
 * that makes a temporary directory with the given prefix; every directory it
 * made is removed after the file's (or block's) last test.
 */
export function useTempDirectories(): (prefix: string) => string {
  const made: string[] = [];
  afterAll(() => {
    for (const directory of made.splice(0)) rmSync(directory, { recursive: true, force: true });
  });
  return (prefix) => {
    const directory = mkdtempSync(path.join(os.tmpdir(), prefix));
    made.push(directory);
    return directory;
  };
}
