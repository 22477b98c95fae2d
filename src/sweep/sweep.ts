import os from 'node:os';
import type pg from 'pg';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { lockSweep, unlockSweep, type SweepKind } from './lock.js';

/**
 * One resumable sweep (backfill, reconcile): a walk over a webhook's assets
 * in keyset chunks, each chunk's payloads, events and new position committed
 * in one transaction, so that an interrupted sweep resumes after the last
 * chunk committed. This module holds what every sweep does alike: the
 * session, one lock per webhook and kind, the resume record found or
 * started, the chunk loop, waking the pumps, progress, dry run and the stop
 * signal. A sweep supplies a SweepJob: what it selects and what it sends.
 */
export interface SweepOptions<Progress> {
  readonly pool: pg.Pool;
  /** Count what would be sent, change nothing: no lock, no record, no write. Default false. */
  readonly dryRun?: boolean;
  /** Recorded with a new sweep. Default: the user and host of the process (`user@host`). */
  readonly requestedBy?: string;
  /** Called after each chunk committed (a dry run: each chunk), with the totals of the sweep, earlier interrupted runs included. */
  readonly onProgress?: (progress: Progress) => void;
  /** Once aborted, the sweep stops after the chunk in progress commits; run again to resume. */
  readonly signal?: AbortSignal;
  /**
   * When another sweep of the kind and webhook is under way: wait for it to
   * end (true, the service's), or refuse at once (false, the default: the commands).
   */
  readonly waitForOther?: boolean;
}

/** The resume record as a sweep found or started it. */
export interface SweepStart {
  /** An earlier, interrupted sweep was continued (a dry run: would be). */
  readonly resumed: boolean;
}

/** What one chunk did. */
export interface SweepStep {
  /** Nothing is left to read: the sweep is completed (committed, unless a dry run). */
  readonly completed: boolean;
  /** It moved the resume record (a dry run: would have): progress is told. */
  readonly advanced: boolean;
  /** It committed payloads, which the pumps are woken for. */
  readonly wrote: boolean;
}

/** What a sweep supplies: its resume record, and one chunk at a time of what it selects and sends. */
export interface SweepJob<Progress> {
  readonly kind: SweepKind;
  readonly webhookId: string;
  /**
   * Finds the unfinished sweep of these arguments, or starts one; a dry run
   * starts none. Runs under the lock (none in a dry run).
   */
  begin(
    session: pg.PoolClient,
    context: { readonly dryRun: boolean; readonly requestedBy: string },
  ): Promise<SweepStart>;
  /**
   * Reads the next chunk and, unless a dry run, commits what it sends with
   * the new position. `stopping()`: the sweep stops after this chunk, so
   * whatever was gathered for later is committed now.
   */
  step(session: pg.PoolClient, stopping: () => boolean): Promise<SweepStep>;
  /** The totals as they stand, for progress lines and the result. */
  progress(): Progress;
}

/** How a sweep ended, in every sweep's result. */
export interface SweepOutcome {
  /** running: interrupted, resumable; completed: every chunk done. A dry run reports what a run would leave. */
  readonly status: 'running' | 'completed';
  readonly resumed: boolean;
  readonly dryRun: boolean;
}

/** Who a sweep is recorded as requested by when its caller does not say. */
function thisUser(): string {
  return `${os.userInfo().username}@${os.hostname()}`;
}

export async function runSweep<Progress>(
  options: SweepOptions<Progress>,
  job: SweepJob<Progress>,
): Promise<SweepOutcome> {
  const dryRun = options.dryRun === true;
  const session = await options.pool.connect();
  let locked = false;
  try {
    if (!dryRun) {
      await lockSweep(session, job.kind, job.webhookId, options.waitForOther === true);
      locked = true;
    }
    const { resumed } = await job.begin(session, { dryRun, requestedBy: options.requestedBy ?? thisUser() });
    const completed = await sweepChunks(options, job, session);
    return { status: completed ? 'completed' : 'running', resumed, dryRun };
  } finally {
    if (locked) await unlockSweep(session, job.kind, job.webhookId).catch(() => {});
    session.release();
  }
}

/** The chunks, until none is left (true) or the signal stops the sweep after a chunk (false). */
async function sweepChunks<Progress>(
  options: SweepOptions<Progress>,
  job: SweepJob<Progress>,
  session: pg.PoolClient,
): Promise<boolean> {
  const stopping = (): boolean => options.signal?.aborted === true;
  for (;;) {
    const step = await job.step(session, stopping);
    // The pumps are woken once committed; if this fails, their next poll finds the payloads.
    if (step.wrote && options.dryRun !== true) await announcePayloadsReady(options.pool).catch(() => {});
    if (step.advanced) options.onProgress?.(job.progress());
    if (step.completed) return true;
    if (stopping()) return false;
  }
}
