import { describe, expect, it } from 'vitest';
import { isExpired, nextState, type NextStateInput } from '../../../src/delivery/policy/next-state.js';

const seriesStartedAt = new Date('2026-11-22T00:00:00.000Z');
const plus = (seconds: number): Date => new Date(seriesStartedAt.getTime() + seconds * 1000);
const schedule = [60, 120, 240, 480, 480] as const;
const DAY = 86_400;

function input(overrides: Partial<NextStateInput> & Pick<NextStateInput, 'attemptsMade' | 'now'>): NextStateInput {
  return {
    classification: 'retryable',
    seriesStartedAt,
    delaysSeconds: schedule,
    deadLetterAfterSeconds: DAY,
    ...overrides,
  };
}

describe('the default schedule 60, 120, 240, 480, 480: five retries, six attempts', () => {
  it.each([
    // attempt, failed at (s after creation), retry at (s after creation)
    [1, 0, 60],
    [2, 60, 180],
    [3, 180, 420],
    [4, 420, 900],
    [5, 900, 1380],
  ])('failed attempt %i at +%is is retried at +%is', (attemptsMade, failedAt, retryAt) => {
    expect(nextState(input({ attemptsMade, now: plus(failedAt) }))).toEqual({ kind: 'retry', at: plus(retryAt) });
  });

  it('dead-letters the sixth failed attempt as retries_exhausted', () => {
    expect(nextState(input({ attemptsMade: 6, now: plus(1380) }))).toEqual({
      kind: 'dead_letter',
      reason: 'retries_exhausted',
    });
  });

  it('counts each delay from the end of the failed attempt, so a slow receiver does not bunch retries', () => {
    // Attempt 2 was due at +60 s but took 25 s to time out.
    expect(nextState(input({ attemptsMade: 2, now: plus(85) }))).toEqual({ kind: 'retry', at: plus(205) });
  });

  it('the gaps between attempts rise from one minute to at most eight', () => {
    let now = 0;
    const gaps: number[] = [];
    for (let attemptsMade = 1; ; attemptsMade += 1) {
      const next = nextState(input({ attemptsMade, now: plus(now) }));
      if (next.kind !== 'retry') {
        expect(next).toEqual({ kind: 'dead_letter', reason: 'retries_exhausted' });
        expect(attemptsMade).toBe(6);
        break;
      }
      const gap = (next.at.getTime() - plus(now).getTime()) / 1000;
      gaps.push(gap);
      now += gap;
    }
    expect(gaps).toEqual([60, 120, 240, 480, 480]);
  });
});

describe('outcomes other than a retryable failure', () => {
  it.each([1, 3, 6, 7])('a 2xx at attempt %i is delivered', (attemptsMade) => {
    expect(nextState(input({ classification: 'delivered', attemptsMade, now: plus(1380) }))).toEqual({
      kind: 'delivered',
    });
  });

  it('a 2xx after the delivery window is still delivered: the receiver has the events', () => {
    expect(nextState(input({ classification: 'delivered', attemptsMade: 2, now: plus(DAY + 30) }))).toEqual({
      kind: 'delivered',
    });
  });

  it.each([1, 4, 6])('a 4xx at attempt %i dead-letters at once as rejected', (attemptsMade) => {
    expect(nextState(input({ classification: 'rejected', attemptsMade, now: plus(0) }))).toEqual({
      kind: 'dead_letter',
      reason: 'rejected',
    });
  });
});

describe('the delivery window (deadLetterAfterSeconds from the start of the series)', () => {
  it.each([
    // attempt, failed at, expected: a retry inside the window is kept; one that
    // would land after it comes at its end (where the job dead-letters it); a
    // failure at or after the end is expired at once.
    [2, DAY - 121, { kind: 'retry', at: plus(DAY - 1) }],
    [2, DAY - 120, { kind: 'retry', at: plus(DAY) }],
    [2, DAY - 60, { kind: 'retry', at: plus(DAY) }],
    [2, DAY - 0.001, { kind: 'retry', at: plus(DAY) }],
    [2, DAY, { kind: 'dead_letter', reason: 'expired' }],
    [1, DAY + 10, { kind: 'dead_letter', reason: 'expired' }],
  ] as const)('failed attempt %i at +%is → %j', (attemptsMade, failedAt, expected) => {
    expect(nextState(input({ attemptsMade, now: plus(failedAt) }))).toEqual(expected);
  });

  it("a short window ends a payload's retries before they are used up, at its end and not before", () => {
    expect(nextState(input({ attemptsMade: 3, now: plus(180), deadLetterAfterSeconds: 400 }))).toEqual({
      kind: 'retry',
      at: plus(400),
    });
    expect(isExpired(seriesStartedAt, plus(400), 400)).toBe(true);
  });

  it('a series started by an operator redelivery gets a fresh window', () => {
    const redeliveredAt = plus(2 * DAY);
    expect(nextState(input({ attemptsMade: 1, seriesStartedAt: redeliveredAt, now: redeliveredAt }))).toEqual({
      kind: 'retry',
      at: plus(2 * DAY + 60),
    });
  });

  it('retries_exhausted is reported when both the retries and the window are used up', () => {
    expect(nextState(input({ attemptsMade: 6, now: plus(DAY + 1) }))).toEqual({
      kind: 'dead_letter',
      reason: 'retries_exhausted',
    });
  });

  it.each([
    [0, false],
    [DAY - 1, false],
    [DAY - 0.001, false],
    [DAY, true],
    [DAY + 1, true],
  ])('isExpired at +%ss is %s', (seconds, expected) => {
    expect(isExpired(seriesStartedAt, plus(seconds), DAY)).toBe(expected);
  });
});

describe('other schedules', () => {
  it('an empty schedule dead-letters the first failure as retries_exhausted', () => {
    expect(nextState(input({ attemptsMade: 1, now: plus(0), delaysSeconds: [] }))).toEqual({
      kind: 'dead_letter',
      reason: 'retries_exhausted',
    });
  });

  it('a single delay allows one retry', () => {
    expect(nextState(input({ attemptsMade: 1, now: plus(0), delaysSeconds: [5] }))).toEqual({
      kind: 'retry',
      at: plus(5),
    });
    expect(nextState(input({ attemptsMade: 2, now: plus(5), delaysSeconds: [5] }))).toEqual({
      kind: 'dead_letter',
      reason: 'retries_exhausted',
    });
  });
});

describe('a caller bug is an exception, not an outcome', () => {
  it.each([0, -1, 1.5, Number.NaN])('attemptsMade %s is refused', (attemptsMade) => {
    expect(() => nextState(input({ attemptsMade, now: plus(0) }))).toThrow(
      /expected attemptsMade to be an integer of at least 1/,
    );
  });
});
