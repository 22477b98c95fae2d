import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { POLL_MS, releaseSessionLock, sessionLockHeld, takeSessionLock } from '../db/session-lock.js';

/**
 * Only one coalescing run at a time per database, whatever schedules it: runs
 * of one database interleaving their chunks would break payload order. A
 * session lock (a row of asset_webhooks.session_locks), which no role without
 * rights on the schema can take.
 */
const COALESCE_LOCK = 'coalesce';
/**
 * Held by a run while it waits for COALESCE_LOCK: a reconcile, which takes
 * that lock chunk by chunk, lets it go first (withCoalesceLock). Polling has
 * no queue, and a reconcile's next chunk would otherwise take the lock back
 * before a waiting run asked again.
 */
const COALESCE_WANTED = 'coalesce:wanted';

/**
 * Takes the coalescing lock for the session, or returns false when another
 * run holds it. A reconcile (src/mirror/reconcile.ts) takes it too, for one
 * short chunk at a time: a run waits a few seconds for that rather than
 * skipping its turn, while a run that finds another run under way, which
 * holds it far longer, gives up once they have passed.
 */
export async function takeCoalesceLock(session: pg.PoolClient): Promise<boolean> {
  if (await takeSessionLock(session, COALESCE_LOCK)) return true;
  // Another run may be waiting already: it holds the wish for both.
  const wanted = await takeSessionLock(session, COALESCE_WANTED);
  try {
    return await takeSessionLock(session, COALESCE_LOCK, { waitMs: 5000 });
  } finally {
    if (wanted) await releaseSessionLock(session, COALESCE_WANTED);
  }
}

/**
 * Runs `work` (a reconcile chunk's transaction) while the session holds the
 * coalescing lock, waiting as long as a run holds it or waits for it. The
 * lock is taken before the transaction begins, so that no transaction stays
 * open while it waits.
 */
export async function withCoalesceLock<T>(session: pg.PoolClient, work: () => Promise<T>): Promise<T> {
  while ((await sessionLockHeld(session, COALESCE_WANTED)) || !(await takeSessionLock(session, COALESCE_LOCK))) {
    await sleep(POLL_MS);
  }
  try {
    return await work();
  } finally {
    await releaseSessionLock(session, COALESCE_LOCK);
  }
}

/** Gives the coalescing lock up. */
export async function releaseCoalesceLock(session: pg.PoolClient): Promise<void> {
  await releaseSessionLock(session, COALESCE_LOCK);
}
