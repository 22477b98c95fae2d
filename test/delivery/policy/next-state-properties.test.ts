import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Classification } from '../../../src/delivery/policy/classify.js';
import {
  LOCAL_FAULT_RETRY_SECONDS,
  MAX_RETRY_AFTER_SECONDS,
  nextState,
} from '../../../src/delivery/policy/next-state.js';
import { parseRetryAfter } from '../../../src/delivery/policy/retry-after.js';

// nextState's delays are written to interval fields the database adds to its
// clock: a delay that is not a finite number of at least 0 fails the
// statement that records the attempt, or schedules a retry in the past.
// Whatever the receiver's Retry-After and whatever the numbers, every delay
// it returns is one.

const MAX_TIME_MS = 8.64e15;
const anyDate = fc.integer({ min: -MAX_TIME_MS, max: MAX_TIME_MS }).map((ms) => new Date(ms));
const anyNumber = fc.oneof(
  fc.double(),
  fc.integer({ min: 0, max: 86_400 }),
  fc.constantFrom(0, -1, Number.NaN, Infinity, -Infinity, Number.MAX_VALUE, 9_999_999_999_999),
);
const classification = fc.constantFrom<Classification>(
  'delivered',
  'rejected',
  'retryable',
  'interrupted',
  'local_fault',
);
const header = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.date({ noInvalidDate: true }).map((date) => date.toUTCString()),
  fc.constantFrom('9999999999999', 'Fri, 31 Dec 9999 23:59:59 GMT', 'Thu, 01 Jan 1950 00:00:00 GMT', '0', ''),
);
/** A Retry-After as deliver.ts gives it: the delay the header asked for from the answer's arrival. */
const retryAfterMs = fc.oneof(
  fc.constant(null),
  anyNumber,
  fc.tuple(header, anyDate).map(([value, at]) => {
    const asked = parseRetryAfter(value, at);
    return asked === null ? null : asked.getTime() - at.getTime();
  }),
);

describe('nextState never produces a delay the database cannot add to its clock', () => {
  it('for any delays and Retry-After', () => {
    fc.assert(
      fc.property(
        classification,
        fc.integer({ min: 1, max: 20 }),
        fc.array(anyNumber, { maxLength: 12 }),
        retryAfterMs,
        (kind, attemptsMade, delaysSeconds, asked) => {
          const next = nextState({ classification: kind, attemptsMade, delaysSeconds, retryAfterMs: asked });
          if (next.kind !== 'retry') return;
          expect(Number.isFinite(next.inMs)).toBe(true);
          expect(next.inMs).toBeGreaterThanOrEqual(0);
          expect(next.inMs).toBeLessThanOrEqual(MAX_TIME_MS);
          if (next.holdWebhookForMs !== undefined) {
            expect(next.holdWebhookForMs).toBeGreaterThanOrEqual(0);
            expect(next.holdWebhookForMs).toBeLessThanOrEqual(MAX_RETRY_AFTER_SECONDS * 1000);
            expect(next.holdWebhookForMs).toBeLessThanOrEqual(next.inMs);
          }
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('for ordinary inputs, a local fault waits LOCAL_FAULT_RETRY_SECONDS and an interrupted attempt none', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Classification>('local_fault', 'interrupted'),
        fc.integer({ min: 1, max: 11 }),
        fc.array(fc.integer({ min: 1, max: 86_400 }), { maxLength: 10 }),
        retryAfterMs,
        (kind, attemptsMade, delaysSeconds, asked) => {
          expect(nextState({ classification: kind, attemptsMade, delaysSeconds, retryAfterMs: asked })).toEqual({
            kind: 'retry',
            inMs: kind === 'local_fault' ? LOCAL_FAULT_RETRY_SECONDS * 1000 : 0,
          });
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('a local fault (this process out of file descriptors or memory)', () => {
  it('is retried after a short delay whatever delays are left, never dead-lettered retries_exhausted', () => {
    expect(nextState({ classification: 'local_fault', delaysSeconds: [60], attemptsMade: 9 })).toEqual({
      kind: 'retry',
      inMs: LOCAL_FAULT_RETRY_SECONDS * 1000,
    });
  });
});
