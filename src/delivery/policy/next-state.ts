import type { AttemptOutcome } from '../attempt-store.js';
import type { Classification } from './classify.js';

export type NextState =
  | { readonly kind: 'delivered' }
  /**
   * Sent again `inMs` after the attempt's end. `holdWebhookForMs`: the
   * receiver's Retry-After (capped), for which none of the webhook's payloads
   * is sent. Both count from the database's clock when the result is written
   * (asset_webhooks.transition_payloads), which also decides the window: a
   * retry decided at or after its end is dead-lettered `expired` there.
   */
  | { readonly kind: 'retry'; readonly inMs: number; readonly holdWebhookForMs?: number }
  | { readonly kind: 'dead_letter'; readonly reason: 'rejected' | 'retries_exhausted' }
  /**
   * The receiver answered 410 Gone (retry.disableOnGone): the payload goes
   * back to its webhook's queue, and the webhook is suspended, nothing of it
   * sent and nothing expiring, until an operator resumes it or its url changes
   * (asset_webhooks.transition_payloads, outcome `suspended`).
   */
  | { readonly kind: 'suspend' };

/** The longest a receiver's Retry-After may hold a payload and its webhook back: one hour. */
export const MAX_RETRY_AFTER_SECONDS = 3600;

/**
 * The delay before an attempt that failed for want of local resources
 * (`local_fault`) is made again: long enough that a process out of file
 * descriptors does not spin through its queue, short enough that deliveries
 * resume soon after the resources are back.
 */
export const LOCAL_FAULT_RETRY_SECONDS = 5;

export interface NextStateInput {
  /** The attempt's result as {@link classifyResponse} classified it. */
  readonly classification: Classification;
  /**
   * Attempts made in this series that count against delaysSeconds, including
   * the one just finished (1 for the first): attempts that failed as
   * `local_fault` do not count.
   */
  readonly attemptsMade: number;
  /** retry.delaysSeconds: the delay before retry n is delaysSeconds[n - 1]. */
  readonly delaysSeconds: readonly number[];
  /**
   * How long after the attempt's end the response's Retry-After asked to
   * wait (see parseRetryAfter), when retry.honorRetryAfter is true; null or
   * absent otherwise. A value that is not a number counts as absent.
   */
  readonly retryAfterMs?: number | null;
}

/**
 * The one function that decides a payload's next state after an attempt, as
 * far as no time decides it: it reads no clock and returns delays. Where the
 * time is, in the database (asset_webhooks.transition_payloads, by
 * asset_webhooks.now()), the window is applied: a retry decided at or past
 * series_started_at + deadLetterAfterSeconds is dead-lettered `expired`, and
 * a retry's time is now + inMs, never after the window's end (the expiry
 * sweep then ends it there, never earlier: a payload expires when
 * deadLetterAfterSeconds *pass*).
 *
 * With the default schedule, delaysSeconds [60, 120, 240, 480, 480] (spec:
 * up to five retries, backoff from one to at most eight minutes) and attempts
 * that fail at once:
 *
 *   attempt 1  at +0 s     fails → retry after  60 s, at +60 s
 *   attempt 2  at +60 s    fails → retry after 120 s, at +180 s
 *   attempt 3  at +180 s   fails → retry after 240 s, at +420 s
 *   attempt 4  at +420 s   fails → retry after 480 s, at +900 s
 *   attempt 5  at +900 s   fails → retry after 480 s, at +1380 s
 *   attempt 6  at +1380 s  fails → dead letter `retries_exhausted`
 *
 * In order:
 * 1. `delivered` (2xx) → delivered, even past the delivery window: the
 *    receiver has the events.
 * 2. `rejected` (4xx) → dead letter `rejected` at once, never retried.
 *    `gone` (410 with retry.disableOnGone) → suspend: the payload waits, with
 *    every other payload of its webhook, for the webhook's resume.
 * 3. `interrupted` (the process died or stopped mid-request, so the
 *    receiver may never have seen it) → retry at once, whatever delays are
 *    left: it was no failure of the receiver's.
 *    `local_fault` (this process ran out of file descriptors or memory) →
 *    retry after LOCAL_FAULT_RETRY_SECONDS, whatever delays are left; the
 *    caller does not count it in attemptsMade.
 * 4. `retryable` with no delay left (attemptsMade > delaysSeconds.length) →
 *    dead letter `retries_exhausted`.
 * 5. Otherwise → retry after delaysSeconds[attemptsMade - 1], or after what
 *    the response's Retry-After asked if that is longer (a Retry-After
 *    lengthens the delay, never shortens it; it counts for at most
 *    MAX_RETRY_AFTER_SECONDS), and the webhook is held that long too.
 *
 * The delay counts from the end of the failed attempt, not from when it was
 * scheduled, so a slow receiver cannot make retries bunch up.
 *
 * Every delay it returns is a finite number of milliseconds of at least 0
 * (a delay that is not a number counts as 0; a delay too large is the
 * largest a Date spans).
 *
 * @throws RangeError when attemptsMade is not an integer of at least 1 (a bug
 *   in the caller, not a delivery outcome).
 */
export function nextState(input: NextStateInput): NextState {
  if (!Number.isInteger(input.attemptsMade) || input.attemptsMade < 1) {
    throw new RangeError(
      `expected attemptsMade to be an integer of at least 1 (the attempt just made counts), got ${input.attemptsMade}`,
    );
  }
  if (input.classification === 'delivered') return { kind: 'delivered' };
  if (input.classification === 'rejected') return { kind: 'dead_letter', reason: 'rejected' };
  if (input.classification === 'gone') return { kind: 'suspend' };
  if (input.classification === 'interrupted') return { kind: 'retry', inMs: 0 };
  if (input.classification === 'local_fault') return { kind: 'retry', inMs: LOCAL_FAULT_RETRY_SECONDS * 1000 };
  const delay = input.delaysSeconds[input.attemptsMade - 1];
  if (delay === undefined) return { kind: 'dead_letter', reason: 'retries_exhausted' };
  const scheduled = delayMs(Number.isNaN(delay) ? 0 : delay * 1000);
  const asked = input.retryAfterMs;
  if (asked === undefined || asked === null || Number.isNaN(asked)) return { kind: 'retry', inMs: scheduled };
  const hold = Math.min(delayMs(asked), MAX_RETRY_AFTER_SECONDS * 1000);
  return { kind: 'retry', inMs: Math.max(scheduled, hold), holdWebhookForMs: hold };
}

/** The outcome an attempt is recorded with for the next state the policy chose. */
export function outcomeOf(next: NextState): Exclude<AttemptOutcome, 'expired'> {
  if (next.kind === 'dead_letter') return next.reason;
  return next.kind === 'suspend' ? 'suspended' : next.kind;
}

/** The longest delay returned: the span of a Date (ECMAScript's time value range), which any timestamp holds. */
const MAX_DELAY_MS = 8.64e15;

/** A delay in ms, never NaN, held within 0 and MAX_DELAY_MS. */
function delayMs(ms: number): number {
  return Math.min(Math.max(ms, 0), MAX_DELAY_MS);
}

/**
 * What an attempt says of its receiver's health (asset_webhooks.webhooks
 * failing_since): true when it failed (timeout, connection error, 5xx, a
 * retried 4xx), false when the receiver answered otherwise, null when the
 * attempt says nothing of the receiver (interrupted by our own process,
 * failed for want of this process's own resources, or a 410 that suspends
 * the webhook: neither healthy, so no standby replaces it, nor backing off).
 */
export function receiverFailed(classification: Classification): boolean | null {
  if (classification === 'interrupted' || classification === 'local_fault' || classification === 'gone') return null;
  return classification === 'retryable';
}
