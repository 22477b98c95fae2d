import type { Classification } from './classify.js';

export type NextState =
  | { readonly kind: 'delivered' }
  /** `holdWebhookUntil`: the receiver's Retry-After (capped), before which none of the webhook's payloads is sent. */
  | { readonly kind: 'retry'; readonly at: Date; readonly holdWebhookUntil?: Date }
  | { readonly kind: 'dead_letter'; readonly reason: 'rejected' | 'retries_exhausted' | 'expired' };

/** The longest a receiver's Retry-After may hold a payload and its webhook back: one hour. */
export const MAX_RETRY_AFTER_SECONDS = 3600;

/**
 * The delay before an attempt that failed for want of local resources
 * (`local_fault`) is made again: long enough that a process out of file
 * descriptors does not spin through its queue, short enough that deliveries
 * resume soon after the resources are back.
 */
export const LOCAL_FAULT_RETRY_SECONDS = 5;

/** The largest time a Date holds (ECMAScript's time value range). */
const MAX_TIME_MS = 8.64e15;

export interface NextStateInput {
  /** The attempt's result as {@link classifyResponse} classified it. */
  readonly classification: Classification;
  /**
   * Attempts made in this series that count against delaysSeconds, including
   * the one just finished (1 for the first): attempts that failed as
   * `local_fault` do not count.
   */
  readonly attemptsMade: number;
  /**
   * Start of the series: the payload's creation, or an operator's redelivery,
   * as the database gives it to the millisecond, rounded up
   * (asset_webhooks.series_start_as_read), so the window never ends here
   * before it ends in the database.
   */
  readonly seriesStartedAt: Date;
  /** When the attempt finished: the clock of the caller, never read here. */
  readonly now: Date;
  /** retry.delaysSeconds: the delay before retry n is delaysSeconds[n - 1]. */
  readonly delaysSeconds: readonly number[];
  /** retry.deadLetterAfterSeconds: the series' delivery window, from seriesStartedAt. */
  readonly deadLetterAfterSeconds: number;
  /**
   * The moment the response's Retry-After asked for (see parseRetryAfter),
   * when retry.honorRetryAfter is true; null or absent otherwise. An invalid
   * Date counts as absent.
   */
  readonly retryAfter?: Date | null;
}

/**
 * The one function that decides a payload's next state after an attempt. It
 * is pure: the time comes in as `now`, so tests move the clock instead of
 * sleeping.
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
 * 3. `retryable` with no delay left (attemptsMade > delaysSeconds.length) →
 *    dead letter `retries_exhausted`.
 * 4. `retryable` with `now` at or past seriesStartedAt + deadLetterAfterSeconds
 *    (24 h by default) → dead letter `expired`.
 * 5. `interrupted` (the process died or stopped mid-request, so the
 *    receiver may never have seen it) → retry at once, within the window,
 *    whatever delays are left: it was no failure of the receiver's.
 *    `local_fault` (this process ran out of file descriptors or memory) →
 *    retry after LOCAL_FAULT_RETRY_SECONDS, within the window, whatever
 *    delays are left; the caller does not count it in attemptsMade.
 * 6. Otherwise → retry at now + delaysSeconds[attemptsMade - 1], or at the
 *    moment the response's Retry-After named if that is later (a Retry-After
 *    lengthens the delay, never shortens it; it counts for at most
 *    MAX_RETRY_AFTER_SECONDS), and the webhook is held until that moment
 *    too. Never after the end of the window: the expiry sweep then finds the
 *    payload expired (isExpired) and dead-letters it when the window ends,
 *    never earlier (a payload expires when deadLetterAfterSeconds *pass*).
 *
 * The delay counts from the end of the failed attempt (`now`), not from when
 * it was scheduled, so a slow receiver cannot make retries bunch up.
 *
 * Every Date it returns is valid, whatever the delays, the window and the
 * Retry-After (a delay that is not a number counts as 0, a window that is not
 * a number as 0 seconds; times past the largest a Date holds are that time).
 *
 * @throws RangeError when attemptsMade is not an integer of at least 1, or
 *   now or seriesStartedAt is an invalid Date (a bug in the caller, not a delivery
 *   outcome).
 */
export function nextState(input: NextStateInput): NextState {
  if (!Number.isInteger(input.attemptsMade) || input.attemptsMade < 1) {
    throw new RangeError(
      `expected attemptsMade to be an integer of at least 1 (the attempt just made counts), got ${input.attemptsMade}`,
    );
  }
  const now = input.now.getTime();
  if (!Number.isFinite(now) || !Number.isFinite(input.seriesStartedAt.getTime())) {
    throw new RangeError(
      `expected now and seriesStartedAt to be valid Dates, got ${String(input.now)} and ${String(input.seriesStartedAt)}`,
    );
  }
  if (input.classification === 'delivered') return { kind: 'delivered' };
  if (input.classification === 'rejected') return { kind: 'dead_letter', reason: 'rejected' };
  const end = deadline(input.seriesStartedAt, input.deadLetterAfterSeconds);
  if (input.classification === 'interrupted') {
    return now >= end ? { kind: 'dead_letter', reason: 'expired' } : { kind: 'retry', at: input.now };
  }
  if (input.classification === 'local_fault') {
    return now >= end
      ? { kind: 'dead_letter', reason: 'expired' }
      : { kind: 'retry', at: dateAt(Math.min(now + LOCAL_FAULT_RETRY_SECONDS * 1000, end)) };
  }
  const delay = input.delaysSeconds[input.attemptsMade - 1];
  if (delay === undefined) return { kind: 'dead_letter', reason: 'retries_exhausted' };
  if (now >= end) return { kind: 'dead_letter', reason: 'expired' };
  const scheduled = Math.min(now + (Number.isNaN(delay) ? 0 : Math.max(0, delay)) * 1000, end);
  const asked = input.retryAfter?.getTime();
  if (asked === undefined || Number.isNaN(asked)) return { kind: 'retry', at: dateAt(scheduled) };
  const hold = Math.min(Math.max(asked, now), now + MAX_RETRY_AFTER_SECONDS * 1000, end);
  return { kind: 'retry', at: dateAt(Math.max(scheduled, hold)), holdWebhookUntil: dateAt(hold) };
}

/** A Date at ms, which is never NaN here, held within the range a Date holds. */
function dateAt(ms: number): Date {
  return new Date(Math.min(Math.max(ms, -MAX_TIME_MS), MAX_TIME_MS));
}

/**
 * What an attempt says of its receiver's health (asset_webhooks.webhooks
 * failing_since): true when it failed (timeout, connection error, 5xx, a
 * retried 4xx), false when the receiver answered otherwise, null when the
 * attempt says nothing of the receiver (interrupted by our own process, or
 * failed for want of this process's own resources).
 */
export function receiverFailed(classification: Classification): boolean | null {
  if (classification === 'interrupted' || classification === 'local_fault') return null;
  return classification === 'retryable';
}

/**
 * Whether a series has used up its delivery window without delivery: true
 * from seriesStartedAt + deadLetterAfterSeconds on. The caller checks it before an
 * attempt, so a payload that waited (a disabled webhook, a queue behind a
 * strict-order predecessor) is dead-lettered `expired` instead of sent late.
 */
export function isExpired(seriesStartedAt: Date, now: Date, deadLetterAfterSeconds: number): boolean {
  return now.getTime() >= deadline(seriesStartedAt, deadLetterAfterSeconds);
}

/** The end of the window in ms: never NaN (a window that is not a number is 0 s), possibly ±Infinity. */
function deadline(seriesStartedAt: Date, deadLetterAfterSeconds: number): number {
  return seriesStartedAt.getTime() + (Number.isNaN(deadLetterAfterSeconds) ? 0 : deadLetterAfterSeconds) * 1000;
}
