import { z } from 'zod';
import { intRange } from './primitives.js';

/** The specification's retry schedule, the default of `retry.delaysSeconds`. */
export const DEFAULT_RETRY_DELAYS_SECONDS: readonly number[] = [60, 120, 240, 480, 480];

/** `retry`: when a failed delivery is tried again, and when it is given up. */
export const retry = z.strictObject({
  /** The wait before each retry, one entry per retry; an empty list means no retry. */
  delaysSeconds: z
    .array(intRange(1, 86_400), { error: 'expected a list of delays in seconds' })
    .max(10, { error: 'expected at most 10 retries' })
    .default(() => [...DEFAULT_RETRY_DELAYS_SECONDS]),
  /** From payload creation; the default is the specification's delivery window. */
  deadLetterAfterSeconds: intRange(1, 30 * 86_400).default(86_400),
  /**
   * 4xx status codes retried like a 5xx instead of dead-lettered as rejected
   * (receivers that throttle: 408, 429). The empty default keeps the
   * specification's rule that a 4xx is rejected. Says nothing of Retry-After.
   */
  retryStatusCodes: z
    .array(intRange(400, 499), { error: 'expected a list of status codes 400..499' })
    .default(() => []),
  /**
   * When true, a retried response's Retry-After lengthens the next delay
   * (never shortens it), for at most one hour and never past the delivery
   * window, and holds the webhook's other payloads until then. Off by
   * default, so that every retry follows delaysSeconds, as the specification
   * says.
   */
  honorRetryAfter: z.boolean({ error: 'expected true or false' }).default(false),
  /**
   * When true, a 410 Gone answer suspends its webhook as a pause does: its
   * payloads wait, the one that got the 410 among them, and none expires,
   * until an operator runs `resume --webhook ID` or a document changes the
   * webhook's url. Off by default, so that a 410 is dead-lettered as
   * `rejected` like every 4xx, as the specification says.
   */
  disableOnGone: z.boolean({ error: 'expected true or false' }).default(false),
});
