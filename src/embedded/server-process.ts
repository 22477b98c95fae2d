/**
 * Runs one embedded PostgreSQL until its stdin closes (see
 * startEmbeddedPostgres; `--durable` keeps fsync and synchronous commit): prints {"url","port","directory"} as one line when
 * ready, then stops the server and removes its files on end of input, SIGTERM
 * or SIGINT.
 */
import { startEmbeddedPostgresInProcess } from './embedded-postgres.js';

const server = await startEmbeddedPostgresInProcess({ durable: process.argv.includes('--durable') });
process.stdout.write(`${JSON.stringify({ url: server.url, port: server.port, directory: server.directory })}\n`);
let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  void server.stop().finally(() => process.exit(0));
};
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
