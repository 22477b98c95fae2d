import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Classification } from '../../../src/delivery/policy/classify.js';
import {
  LOCAL_FAULT_RETRY_SECONDS,
  MAX_RETRY_AFTER_SECONDS,
  nextState,
} from '../../../src/delivery/policy/next-state.js';
import { parseRetryAfter } from '../../../src/delivery/policy/retry-after.js';

// nextState's answer is written to timestamptz columns: a Date it returns that
// is not valid fails the statement that records the attempt. Whatever the
// receiver's Retry-After and whatever the numbers, every Date it returns is valid.

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
const retryAfter = fc.oneof(
  fc.constant(null),
  fc.constant(new Date(NaN)),
  anyDate,
  fc.tuple(header, anyDate).map(([value, at]) => parseRetryAfter(value, at)),
);

describe('nextState never produces an invalid Date', () => {
  it('for any valid times, any delays, window and Retry-After', () => {
    fc.assert(
      fc.property(
        classification,
        fc.integer({ min: 1, max: 20 }),
        anyDate,
        anyDate,
        fc.array(anyNumber, { maxLength: 12 }),
        anyNumber,
        retryAfter,
        (kind, attemptsMade, seriesStartedAt, now, delaysSeconds, deadLetterAfterSeconds, asked) => {
          const next = nextState({
            classification: kind,
            attemptsMade,
            seriesStartedAt,
            now,
            delaysSeconds,
            deadLetterAfterSeconds,
            retryAfter: asked,
          });
          if (next.kind !== 'retry') return;
          expect(Number.isFinite(next.at.getTime())).toBe(true);
          if (next.holdWebhookUntil !== undefined) {
            expect(Number.isFinite(next.holdWebhookUntil.getTime())).toBe(true);
            expect(next.holdWebhookUntil.getTime()).toBeLessThanOrEqual(now.getTime() + MAX_RETRY_AFTER_SECONDS * 1000);
          }
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('for ordinary inputs, a retry is never before now, nor past the window, nor held longer than an hour', () => {
    const start = Date.parse('2026-11-22T00:00:00.000Z');
    fc.assert(
      fc.property(
        fc.constantFrom<Classification>('retryable', 'local_fault', 'interrupted'),
        fc.integer({ min: 1, max: 11 }),
        fc.integer({ min: 0, max: 90_000_000 }),
        fc.array(fc.integer({ min: 1, max: 86_400 }), { maxLength: 10 }),
        fc.integer({ min: 1, max: 30 * 86_400 }),
        retryAfter,
        (kind, attemptsMade, elapsedMs, delaysSeconds, window, asked) => {
          const now = new Date(start + elapsedMs);
          const next = nextState({
            classification: kind,
            attemptsMade,
            seriesStartedAt: new Date(start),
            now,
            delaysSeconds,
            deadLetterAfterSeconds: window,
            retryAfter: asked,
          });
          if (next.kind !== 'retry') return;
          expect(next.at.getTime()).toBeGreaterThanOrEqual(now.getTime());
          expect(next.at.getTime()).toBeLessThanOrEqual(start + window * 1000);
          if (kind === 'local_fault')
            expect(next.at.getTime()).toBeLessThanOrEqual(now.getTime() + LOCAL_FAULT_RETRY_SECONDS * 1000);
          if (next.holdWebhookUntil)
            expect(next.holdWebhookUntil.getTime()).toBeLessThanOrEqual(now.getTime() + MAX_RETRY_AFTER_SECONDS * 1000);
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('refuses an invalid now or seriesStartedAt as the caller bug it is, rather than return an invalid Date', () => {
    const valid = new Date('2026-11-22T00:00:00.000Z');
    const input = {
      classification: 'retryable' as const,
      attemptsMade: 1,
      delaysSeconds: [60],
      deadLetterAfterSeconds: 86_400,
    };
    expect(() => nextState({ ...input, seriesStartedAt: valid, now: new Date(NaN) })).toThrow(RangeError);
    expect(() => nextState({ ...input, seriesStartedAt: new Date(NaN), now: valid })).toThrow(RangeError);
  });
});

describe('a local fault (this process out of file descriptors or memory)', () => {
  const seriesStartedAt = new Date('2026-11-22T00:00:00.000Z');
  const at = (seconds: number): Date => new Date(seriesStartedAt.getTime() + seconds * 1000);
  const base = {
    classification: 'local_fault',
    seriesStartedAt,
    delaysSeconds: [60],
    deadLetterAfterSeconds: 600,
  } as const;

  it('is retried after a short delay whatever delays are left, never dead-lettered retries_exhausted', () => {
    expect(nextState({ ...base, attemptsMade: 9, now: at(10) })).toEqual({
      kind: 'retry',
      at: at(10 + LOCAL_FAULT_RETRY_SECONDS),
    });
  });

  it('is retried no later than the end of the window, and expires once it has passed', () => {
    expect(nextState({ ...base, attemptsMade: 1, now: at(598) })).toEqual({ kind: 'retry', at: at(600) });
    expect(nextState({ ...base, attemptsMade: 1, now: at(600) })).toEqual({ kind: 'dead_letter', reason: 'expired' });
  });
});
