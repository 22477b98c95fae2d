import { describe, expect, it } from 'vitest';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { MAX_RETRY_AFTER_SECONDS, nextState, receiverFailed } from '../../../src/delivery/policy/next-state.js';
import { MAX_DELAY_SECONDS, parseRetryAfter } from '../../../src/delivery/policy/retry-after.js';

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

describe('Retry-After values a hostile or broken receiver sends: each a valid bounded moment, or nothing', () => {
  it.each([
    ['huge, past what a Date holds', '9999999999999', plus(MAX_DELAY_SECONDS)],
    ['more digits than a number holds', '9'.repeat(40), plus(MAX_DELAY_SECONDS)],
    ['0', '0', now],
    ['an HTTP date in year 9999', 'Fri, 31 Dec 9999 23:59:59 GMT', new Date('9999-12-31T23:59:59.000Z')],
    ['an HTTP date before 1970', 'Thu, 01 Jan 1950 00:00:00 GMT', now],
    ['an HTTP date in year 0', 'Sat, 01 Jan 0000 00:00:00 GMT', now],
    ['tabs around the value', '\t30\t', plus(30)],
  ] as const)('%s (%j)', (_name, header, expected) => {
    const at = parseRetryAfter(header, now);
    expect(at).toEqual(expected);
    expect(Number.isFinite(at!.getTime())).toBe(true);
  });

  it.each([
    ['negative', '-1'],
    ['fractional', '0.5'],
    ['empty', ''],
    ['only spaces', '   '],
    ['repeated, comma-joined', '120, 60'],
    ['repeated, the same value', '120, 120'],
    ['two dates, comma-joined', 'Sun, 22 Nov 2026 12:01:30 GMT, Sun, 22 Nov 2026 12:01:30 GMT'],
    ['non-ASCII digits', '١٢٠'],
    ['non-ASCII after digits', '12\u00e9'],
    ['a NUL', '12\u0000'],
    ['a sign', '+30'],
    ['an exponent', '1e3'],
    ['hexadecimal', '0x10'],
    ['Infinity', 'Infinity'],
    ['a date that does not exist', 'Sun, 32 Nov 2026 25:61:61 GMT'],
    ['a date in a year no Date holds', 'Sun, 22 Nov 999999 12:00:00 GMT'],
    ['a date in another zone', 'Sun, 22 Nov 2026 12:01:30 +0100'],
    ['an asctime date (no zone)', 'Sun Nov 22 12:01:30 2026'],
    ['a value longer than any valid one', `${'1'.repeat(30)}${' '.repeat(40)}`],
  ] as const)('%s (%j) is nothing', (_name, header) => {
    expect(parseRetryAfter(header, now)).toBeNull();
  });

  it('is nothing when read at an invalid time', () => {
    expect(parseRetryAfter('30', new Date(NaN))).toBeNull();
  });
});

describe('the next attempt after a retried response with Retry-After', () => {
  const base = { classification: 'retryable', attemptsMade: 1, delaysSeconds: [60, 120] } as const;
  const after = (header: string): number | null => {
    const asked = parseRetryAfter(header, now);
    return asked === null ? null : asked.getTime() - now.getTime();
  };

  it('waits for Retry-After when it is longer than the scheduled delay, and holds the webhook as long', () => {
    expect(nextState({ ...base, retryAfterMs: after('300') })).toEqual({
      kind: 'retry',
      inMs: 300_000,
      holdWebhookForMs: 300_000,
    });
  });

  it('keeps the scheduled delay when Retry-After is shorter: it lengthens, never shortens', () => {
    expect(nextState({ ...base, retryAfterMs: after('10') })).toEqual({
      kind: 'retry',
      inMs: 60_000,
      holdWebhookForMs: 10_000,
    });
  });

  it('counts Retry-After for at most an hour', () => {
    expect(MAX_RETRY_AFTER_SECONDS).toBe(3600);
    expect(nextState({ ...base, retryAfterMs: after('86000') })).toEqual({
      kind: 'retry',
      inMs: 3_600_000,
      holdWebhookForMs: 3_600_000,
    });
  });

  it('a huge Retry-After (past what a Date holds) holds for an hour', () => {
    expect(nextState({ ...base, retryAfterMs: after('9999999999999') })).toEqual({
      kind: 'retry',
      inMs: 3_600_000,
      holdWebhookForMs: 3_600_000,
    });
  });

  it('a Retry-After that is not a number counts as absent', () => {
    expect(nextState({ ...base, retryAfterMs: Number.NaN })).toEqual({ kind: 'retry', inMs: 60_000 });
  });

  it('an interrupted attempt is retried at once, whatever delays are left, and says nothing of the receiver', () => {
    expect(nextState({ ...base, classification: 'interrupted', attemptsMade: 9 })).toEqual({ kind: 'retry', inMs: 0 });
    expect([
      receiverFailed('interrupted'),
      receiverFailed('retryable'),
      receiverFailed('delivered'),
      receiverFailed('rejected'),
    ]).toEqual([null, true, false, false]);
  });
});
