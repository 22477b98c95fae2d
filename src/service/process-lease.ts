import pg from 'pg';
import type { Logger } from 'pino';
import { describeError } from '../db/connect.js';

/** The session setting that names the process on every connection of its pool (migration 0011). */
export const PROCESS_ID_SETTING = 'asset_webhooks.process_id';

export interface ProcessLease {
  /** Gives the lease up: from then on, maintenance may hand back this process's unfinished attempts. */
  release(): Promise<void>;
}

/**
 * Holds a session advisory lock keyed by the process's id (which its pool
 * records on every attempt it starts: PROCESS_ID_SETTING) on a connection of
 * its own, for as long as the process lives. PostgreSQL frees the lock when
 * the process dies and its session ends, and maintenance then hands back the
 * attempts the process left unfinished (asset_webhooks.process_gone) without
 * waiting for the ten-minute rule. A lost connection is opened again, and the
 * lock taken again, with growing pauses; meanwhile the process counts as gone
 * for attempts older than maintenance's grace period, which a live process's
 * request outlasts only while it retries writing a result.
 */
export async function holdProcessLease(databaseUrl: string, processId: string, logger: Logger): Promise<ProcessLease> {
  let client: pg.Client | undefined;
  let released = false;
  let lost = false;
  let retry: NodeJS.Timeout | undefined;

  const take = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: databaseUrl, application_name: 'asset-webhooks lease', keepAlive: true });
    next.on('error', () => {});
    next.on('end', () => {
      if (client !== next || released) return;
      client = undefined;
      if (!lost) logger.warn({ processId }, 'lost the connection that holds this process\'s lease; taking it again');
      lost = true;
      schedule(0);
    });
    try {
      await next.connect();
      await next.query('select pg_advisory_lock(asset_webhooks.process_lease_key($1))', [processId]);
    } catch (error) {
      await next.end().catch(() => {});
      throw error;
    }
    if (released) {
      await next.end().catch(() => {});
      return;
    }
    client = next;
    if (lost) logger.info({ processId }, 'this process\'s lease is held again');
    lost = false;
  };
  const schedule = (attempt: number): void => {
    retry = setTimeout(() => {
      take().catch((error: unknown) => {
        if (released) return;
        if (attempt === 0) logger.warn({ processId, err: describeError(error) }, 'could not take this process\'s lease; trying again');
        schedule(attempt + 1);
      });
    }, Math.min(250 * 2 ** attempt, 5000));
  };

  await take();
  return {
    async release() {
      released = true;
      clearTimeout(retry);
      const held = client;
      client = undefined;
      await held?.end().catch(() => {});
    },
  };
}
