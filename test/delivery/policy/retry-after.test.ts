import { describe, expect, it } from 'vitest';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { MAX_RETRY_AFTER_SECONDS, nextState, receiverFailed } from '../../../src/delivery/policy/next-state.js';
import { parseRetryAfter } from '../../../src/delivery/policy/retry-after.js';

const now = new Date('2026-11-22T12:00:00.000Z');
const plus = (seconds: number): Date => new Date(now.getTime() + seconds * 1000);
const response = (statusCode: number) =>
  ({ kind: 'response', statusCode, durationMs: 1, responseExcerpt: '' }) as const;

describe('retry.retryStatusCodes', () => {
  it.each([
    [408, [408, 429], 'retryable'],
    [429, [408, 429], 'retryable'],
    [400, [408, 429], 'rejected'],
    [429, [], 'rejected'],
    [503, [], 'retryable'],
    [200, [429], 'delivered'],
  ] as const)('status %i with %j is %s', (status, codes, expected) => {
    expect(classifyResponse(response(status), codes)).toBe(expected);
  });
});

describe('reading Retry-After', () => {
  it.each([
    ['120', plus(120)],
    ['0', now],
    [' 7 ', plus(7)],
    ['Sun, 22 Nov 2026 12:01:30 GMT', plus(90)],
    ['Sunday, 22-Nov-26 12:01:30 GMT', plus(90)],
    ['Sun, 22 Nov 2026 11:00:00 GMT', now],
  ] as const)('%j is %s', (header, expected) => {
    expect(parseRetryAfter(header, now)).toEqual(expected);
  });

  it.each([undefined, '', '-5', '1.5', 'soon', '2026-11-22T12:01:30Z'])('%j is nothing', (header) => {
    expect(parseRetryAfter(header, now)).toBeNull();
  });
});

describe('the next attempt after a retried response with Retry-After', () => {
  const base = {
    classification: 'retryable',
    attemptsMade: 1,
    createdAt: now,
    now,
    delaysSeconds: [60, 120],
    deadLetterAfterSeconds: 86_400,
  } as const;

  it('waits for Retry-After when it is longer than the scheduled delay, and holds the webhook until then', () => {
    expect(nextState({ ...base, retryAfter: plus(300) })).toEqual({
      kind: 'retry',
      at: plus(300),
      holdWebhookUntil: plus(300),
    });
  });

  it('keeps the scheduled delay when Retry-After is shorter: it lengthens, never shortens', () => {
    expect(nextState({ ...base, retryAfter: plus(10) })).toEqual({
      kind: 'retry',
      at: plus(60),
      holdWebhookUntil: plus(10),
    });
  });

  it('counts Retry-After for at most an hour', () => {
    expect(MAX_RETRY_AFTER_SECONDS).toBe(3600);
    expect(nextState({ ...base, retryAfter: plus(86_000) })).toEqual({
      kind: 'retry',
      at: plus(3600),
      holdWebhookUntil: plus(3600),
    });
  });

  it('never past the end of the delivery window', () => {
    expect(nextState({ ...base, deadLetterAfterSeconds: 600, retryAfter: plus(3000) })).toEqual({
      kind: 'retry',
      at: plus(600),
      holdWebhookUntil: plus(600),
    });
  });

  it('an interrupted attempt is retried at once, whatever delays are left, and says nothing of the receiver', () => {
    expect(nextState({ ...base, classification: 'interrupted', attemptsMade: 9 })).toEqual({ kind: 'retry', at: now });
    expect(nextState({ ...base, classification: 'interrupted', now: plus(90_000) })).toEqual({
      kind: 'dead_letter',
      reason: 'expired',
    });
    expect([
      receiverFailed('interrupted'),
      receiverFailed('retryable'),
      receiverFailed('delivered'),
      receiverFailed('rejected'),
    ]).toEqual([null, true, false, false]);
  });
});
