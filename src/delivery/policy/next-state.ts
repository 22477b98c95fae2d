import type { Classification } from './classify.js';

export type NextState =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'retry'; readonly at: Date }
  | { readonly kind: 'dead_letter'; readonly reason: 'rejected' | 'retries_exhausted' | 'expired' };

export interface NextStateInput {
  readonly classification: Classification;
  /** Attempts made in this series, including the one just finished. */
  readonly attemptsMade: number;
  /** Start of the series: the payload's creation, or an operator's redelivery. */
  readonly createdAt: Date;
  readonly now: Date;
  readonly delaysSeconds: readonly number[];
  readonly deadLetterAfterSeconds: number;
}

/**
 * The one function that decides a payload's next state after an attempt.
 *
 * With the default schedule, delaysSeconds [60, 120, 240, 480, 480]:
 *
 *   attempt 1 at creation  → fails → retry 60 s later
 *   attempt 2              → fails → retry 120 s later
 *   attempt 3              → fails → retry 240 s later
 *   attempt 4              → fails → retry 480 s later
 *   attempt 5              → fails → retry 480 s later
 *   attempt 6              → fails → dead letter `retries_exhausted`
 *
 * A 2xx at any attempt: delivered. A 4xx: dead letter `rejected` at once. A
 * retry that would fall at or after createdAt + deadLetterAfterSeconds (24 h by
 * default): dead letter `expired`.
 */
export function nextState(input: NextStateInput): NextState {
  if (input.classification === 'delivered') return { kind: 'delivered' };
  if (input.classification === 'rejected') return { kind: 'dead_letter', reason: 'rejected' };
  const delay = input.delaysSeconds[input.attemptsMade - 1];
  if (delay === undefined) return { kind: 'dead_letter', reason: 'retries_exhausted' };
  const at = new Date(input.now.getTime() + delay * 1000);
  if (at.getTime() >= deadline(input.createdAt, input.deadLetterAfterSeconds)) return { kind: 'dead_letter', reason: 'expired' };
  return { kind: 'retry', at };
}

/** Whether a payload's series has passed its deadline without delivery. */
export function isExpired(createdAt: Date, now: Date, deadLetterAfterSeconds: number): boolean {
  return now.getTime() >= deadline(createdAt, deadLetterAfterSeconds);
}

function deadline(createdAt: Date, deadLetterAfterSeconds: number): number {
  return createdAt.getTime() + deadLetterAfterSeconds * 1000;
}
