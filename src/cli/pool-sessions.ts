import pg from 'pg';
import { describeError, KEEPALIVE } from '../db/connect.js';

/** How long ending the sessions may wait for a connection of its own. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The server sessions of a pool's clients, ended on demand from a connection
 * of its own (pg_terminate_backend), for a command stopped by a signal in the
 * middle of a transaction (`migrate`): the server rolls back the transaction
 * each session has under way, whatever statement runs or whatever the
 * command does between two statements, and the command's next query fails.
 * Cancelling the statement instead would be lost between two statements, and
 * closing the socket would leave the server running the statement until it
 * next writes to it.
 */
export class PoolSessions {
  private readonly pids = new Set<number>();
  private databaseUrl: string | undefined;
  private ending = false;

  /** Records the session of every client `pool` hands out from now on; one handed out after end() is ended too. */
  watch(pool: pg.Pool, databaseUrl: string): void {
    this.databaseUrl = databaseUrl;
    pool.on('acquire', (client) => {
      // pg keeps the server's process id of each connection (BackendKeyData) without declaring it.
      const pid = (client as unknown as { processID?: unknown }).processID;
      if (typeof pid !== 'number') return;
      this.pids.add(pid);
      if (this.ending) void this.end();
    });
  }

  /** Whether watch() was called: before it, the command has no session to end. */
  get watching(): boolean {
    return this.databaseUrl !== undefined;
  }

  /**
   * Ends every session recorded. Never throws: a failure is returned as one
   * line (the server's rollback then happens when the process exits and its
   * connections close).
   */
  async end(): Promise<string | undefined> {
    this.ending = true;
    if (this.databaseUrl === undefined || this.pids.size === 0) return undefined;
    const pids = [...this.pids];
    const client = new pg.Client({
      connectionString: this.databaseUrl,
      application_name: 'asset-webhooks',
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      ...KEEPALIVE,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select pg_terminate_backend(pid) from unnest($1::int[]) as pid', [pids]);
      return undefined;
    } catch (error) {
      return describeError(error);
    } finally {
      await client.end().catch(() => {});
    }
  }
}
