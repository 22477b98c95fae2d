import pg from 'pg';
import type { Logger } from 'pino';
import { describeError, KEEPALIVE, pinSearchPath } from '../db/connect.js';
import { releaseSessionLock, takeSessionLock } from '../db/session-lock.js';

/**
 * The application_name of every connection of a `run` process's pool: it
 * names the process, and the attempts it starts record the id from it
 * (asset_webhooks.process_of_session).
 */
export function runApplicationName(processId: string): string {
  return `asset-webhooks run ${processId}`;
}

export interface ProcessLease {
  /** How long the lease has been held without a break, in ms; 0 while it is being taken again. */
  heldForMs(): number;
  /** Gives the lease up: from then on, crash recovery may close this process's unfinished attempts. */
  release(): Promise<void>;
}

/** Drops a connection at once. pg has no public way: its end() waits for the peer, which may never answer. */
function destroy(client: pg.Client): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

export interface LeaseOptions {
  /** How often the lease's connection is checked. Default 10 s. */
  readonly checkEveryMs?: number;
  /** How long the check's answer may take before the connection counts as lost. Default 10 s. */
  readonly answerWithinMs?: number;
}

/** The session lock (asset_webhooks.session_locks) that is a process's lease; see asset_webhooks.process_gone. */
export function processLeaseName(processId: string): string {
  return `process:${processId}`;
}

/**
 * Holds a session lock named by the process's id (a row of
 * asset_webhooks.session_locks) on a connection of its own, for as long as the
 * process lives. The lock is free once the process dies and its session ends,
 * and crash recovery
 * (src/delivery/recover.ts) then closes the attempts the process left
 * unfinished (asset_webhooks.orphaned_attempts) and sends their payloads again.
 *
 * A lost connection is opened again, and the lock taken again, with pauses of
 * at most five seconds. The connection is checked every ten seconds, so one
 * that a network device dropped silently (the server freed the lock, the
 * socket here never heard) is noticed within twenty.
 */
export async function holdProcessLease(
  databaseUrl: string,
  processId: string,
  logger: Logger,
  options: LeaseOptions = {},
): Promise<ProcessLease> {
  const holder = new LeaseHolder(databaseUrl, processId, logger, {
    checkEveryMs: options.checkEveryMs ?? 10_000,
    answerWithinMs: options.answerWithinMs ?? 10_000,
  });
  await holder.start();
  return { heldForMs: () => holder.heldForMs(), release: () => holder.release() };
}

/** The state of one process's lease: its connection, the take under way, the timers. */
class LeaseHolder {
  private client: pg.Client | undefined;
  private heldSince = 0;
  private released = false;
  private lost = false;
  private retry: NodeJS.Timeout | undefined;
  private check: NodeJS.Timeout | undefined;
  // A take under way: release() waits for it, or the lock it is taking would
  // outlive the release (the connection is only set once the lock is held).
  private taking: Promise<void> | undefined;
  private connecting: pg.Client | undefined;

  constructor(
    private readonly databaseUrl: string,
    private readonly processId: string,
    private readonly logger: Logger,
    private readonly options: Required<LeaseOptions>,
  ) {}

  async start(): Promise<void> {
    this.taking = this.take();
    await this.taking;
  }

  heldForMs(): number {
    return this.client ? performance.now() - this.heldSince : 0;
  }

  private drop(gone: pg.Client, why: string): void {
    if (this.client !== gone || this.released) return;
    this.client = undefined;
    this.heldSince = 0;
    clearInterval(this.check);
    if (!this.lost)
      this.logger.warn(
        { processId: this.processId, why },
        "lost the connection that holds this process's lease; taking it again",
      );
    this.lost = true;
    destroy(gone);
    this.schedule(0);
  }

  private async take(): Promise<void> {
    const next = new pg.Client({
      connectionString: this.databaseUrl,
      application_name: `asset-webhooks lease ${this.processId}`,
      ...KEEPALIVE,
    });
    next.on('error', (error: Error) => this.drop(next, describeError(error)));
    next.on('end', () => this.drop(next, 'the connection ended'));
    this.connecting = next;
    try {
      await next.connect();
      await pinSearchPath(next);
      // Waits while crash recovery in another process holds the lease's row
      // (asset_webhooks.process_gone), or while this process's previous
      // session, whose connection was lost, still lives on the server.
      await takeSessionLock(next, processLeaseName(this.processId), { waitMs: Infinity });
      // The lease's age is read by the one clock (asset_webhooks.process_gone_grace).
      await next.query('update asset_webhooks.session_locks set taken_at = asset_webhooks.now() where name = $1', [
        processLeaseName(this.processId),
      ]);
      // Held again: a free spell another process saw has ended, and must not
      // be added to a later one (asset_webhooks.record_configuration).
      await next.query(
        'update asset_webhooks.process_configurations set lease_free_since = null where process_id = $1 and lease_free_since is not null',
        [this.processId],
      );
    } catch (error) {
      await next.end().catch(() => {});
      throw error;
    } finally {
      this.connecting = undefined;
    }
    if (this.released) {
      await next.end().catch(() => {});
      return;
    }
    this.held(next);
  }

  /** The lease is held on `next`: from now on its connection is checked. */
  private held(next: pg.Client): void {
    this.client = next;
    this.heldSince = performance.now();
    if (this.lost) this.logger.info({ processId: this.processId }, "this process's lease is held again");
    this.lost = false;
    const { answerWithinMs } = this.options;
    this.check = setInterval(() => {
      const answered = setTimeout(() => this.drop(next, `no answer within ${answerWithinMs} ms`), answerWithinMs);
      next.query('select 1').then(
        () => clearTimeout(answered),
        (error: unknown) => {
          clearTimeout(answered);
          this.drop(next, describeError(error));
        },
      );
    }, this.options.checkEveryMs);
    this.check.unref();
  }

  private schedule(attempt: number): void {
    this.retry = setTimeout(
      () => {
        this.taking = this.take();
        this.taking.catch((error: unknown) => {
          if (this.released) return;
          if (attempt === 0)
            this.logger.warn(
              { processId: this.processId, err: describeError(error) },
              "could not take this process's lease; trying again",
            );
          this.schedule(attempt + 1);
        });
      },
      Math.min(250 * 2 ** attempt, 5000),
    );
  }

  async release(): Promise<void> {
    this.released = true;
    clearTimeout(this.retry);
    clearInterval(this.check);
    // A take under way ends within 2 s, or its connection is dropped.
    const abandon = setTimeout(() => this.connecting && destroy(this.connecting), 2000);
    await this.taking?.catch(() => {});
    clearTimeout(abandon);
    const held = this.client;
    this.client = undefined;
    if (!held) return;
    // A silently dropped connection never answers either statement below.
    const ended = setTimeout(() => destroy(held), 2000);
    // The lease is given up explicitly, so it is free when release() returns;
    // it is otherwise free only once its session's backend has exited.
    await releaseSessionLock(held, processLeaseName(this.processId)).catch(() => {});
    await held.end().catch(() => {});
    clearTimeout(ended);
  }
}
