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
  const checkEveryMs = options.checkEveryMs ?? 10_000;
  const answerWithinMs = options.answerWithinMs ?? 10_000;
  let client: pg.Client | undefined;
  let heldSince = 0;
  let released = false;
  let lost = false;
  let retry: NodeJS.Timeout | undefined;
  let check: NodeJS.Timeout | undefined;
  // A take under way: release() waits for it, or the lock it is taking would
  // outlive the release (the connection is only set once the lock is held).
  let taking: Promise<void> | undefined;
  let connecting: pg.Client | undefined;

  const drop = (gone: pg.Client, why: string): void => {
    if (client !== gone || released) return;
    client = undefined;
    heldSince = 0;
    clearInterval(check);
    if (!lost) logger.warn({ processId, why }, "lost the connection that holds this process's lease; taking it again");
    lost = true;
    destroy(gone);
    schedule(0);
  };
  const take = async (): Promise<void> => {
    const next = new pg.Client({
      connectionString: databaseUrl,
      application_name: `asset-webhooks lease ${processId}`,
      ...KEEPALIVE,
    });
    next.on('error', (error: Error) => drop(next, describeError(error)));
    next.on('end', () => drop(next, 'the connection ended'));
    connecting = next;
    try {
      await next.connect();
      await pinSearchPath(next);
      // Waits while crash recovery in another process holds the lease's row
      // (asset_webhooks.process_gone), or while this process's previous
      // session, whose connection was lost, still lives on the server.
      await takeSessionLock(next, processLeaseName(processId), { waitMs: Infinity });
      // Held again: a free spell another process saw has ended, and must not
      // be added to a later one (asset_webhooks.record_configuration).
      await next.query(
        'update asset_webhooks.process_configurations set lease_free_since = null where process_id = $1 and lease_free_since is not null',
        [processId],
      );
    } catch (error) {
      await next.end().catch(() => {});
      throw error;
    } finally {
      connecting = undefined;
    }
    if (released) {
      await next.end().catch(() => {});
      return;
    }
    client = next;
    heldSince = performance.now();
    if (lost) logger.info({ processId }, "this process's lease is held again");
    lost = false;
    check = setInterval(() => {
      const answered = setTimeout(() => drop(next, `no answer within ${answerWithinMs} ms`), answerWithinMs);
      next.query('select 1').then(
        () => clearTimeout(answered),
        (error: unknown) => {
          clearTimeout(answered);
          drop(next, describeError(error));
        },
      );
    }, checkEveryMs);
    check.unref();
  };
  const schedule = (attempt: number): void => {
    retry = setTimeout(
      () => {
        taking = take();
        taking.catch((error: unknown) => {
          if (released) return;
          if (attempt === 0)
            logger.warn({ processId, err: describeError(error) }, "could not take this process's lease; trying again");
          schedule(attempt + 1);
        });
      },
      Math.min(250 * 2 ** attempt, 5000),
    );
  };

  taking = take();
  await taking;
  return {
    heldForMs: () => (client ? performance.now() - heldSince : 0),
    async release() {
      released = true;
      clearTimeout(retry);
      clearInterval(check);
      // A take under way ends within 2 s, or its connection is dropped.
      const abandon = setTimeout(() => connecting && destroy(connecting), 2000);
      await taking?.catch(() => {});
      clearTimeout(abandon);
      const held = client;
      client = undefined;
      if (!held) return;
      // A silently dropped connection never answers either statement below.
      const ended = setTimeout(() => destroy(held), 2000);
      // The lease is given up explicitly, so it is free when release() returns;
      // it is otherwise free only once its session's backend has exited.
      await releaseSessionLock(held, processLeaseName(processId)).catch(() => {});
      await held.end().catch(() => {});
      clearTimeout(ended);
    },
  };
}
