import type pg from 'pg';
import { releaseSessionLock, takeSessionLock } from '../db/session-lock.js';
import { UserError } from '../errors.js';

/** The sweeps: each walks assets (or members, or payloads) of one webhook, chunk by chunk, resumably. */
export type SweepKind = 'backfill' | 'reconcile' | 'replay';

/**
 * The session lock (asset_webhooks.session_locks) that a sweep of the
 * webhook holds: one sweep of a kind per webhook at a time, whichever
 * process runs it. Maintenance reads reconcile's (requeueOrphanedReconciles).
 */
export function sweepLockName(kind: SweepKind, webhookId: string): string {
  return `${kind}:${webhookId}`;
}

/**
 * Takes the session's lock on the webhook's sweeps of this kind; the lock
 * goes with the session of a process that dies. `wait`: wait for another
 * under way (the service's reconciles); else refuse at once (the commands),
 * rather than send the same assets twice.
 */
export async function lockSweep(
  session: pg.PoolClient,
  kind: SweepKind,
  webhookId: string,
  wait: boolean,
): Promise<void> {
  if (await takeSessionLock(session, sweepLockName(kind, webhookId), { waitMs: wait ? Infinity : 0 })) return;
  throw new UserError(
    `${kind}_running`,
    `--webhook: expected no other ${kind} of webhook ${webhookId} under way, but another process runs one ` +
      `(wait for it, or stop it and run this again to resume; asset_webhooks.${kind}s shows its progress)`,
  );
}

export async function unlockSweep(session: pg.PoolClient, kind: SweepKind, webhookId: string): Promise<void> {
  await releaseSessionLock(session, sweepLockName(kind, webhookId));
}
