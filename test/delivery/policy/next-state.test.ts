import { describe, expect, it } from 'vitest';
import { nextState, outcomeOf, type NextStateInput } from '../../../src/delivery/policy/next-state.js';

const schedule = [60, 120, 240, 480, 480] as const;

function input(overrides: Partial<NextStateInput> & Pick<NextStateInput, 'attemptsMade'>): NextStateInput {
  return { classification: 'retryable', delaysSeconds: schedule, ...overrides };
}

describe('the default schedule 60, 120, 240, 480, 480: five retries, six attempts', () => {
  it.each([
    // attempt, retried after (s after the attempt's end)
    [1, 60],
    [2, 120],
    [3, 240],
    [4, 480],
    [5, 480],
  ])('failed attempt %i is retried %is after its end', (attemptsMade, delay) => {
    expect(nextState(input({ attemptsMade }))).toEqual({ kind: 'retry', inMs: delay * 1000 });
  });

  it('dead-letters the sixth failed attempt as retries_exhausted', () => {
    expect(nextState(input({ attemptsMade: 6 }))).toEqual({
      kind: 'dead_letter',
      reason: 'retries_exhausted',
    });
  });

  it('the gaps between attempts rise from one minute to at most eight', () => {
    const gaps: number[] = [];
    for (let attemptsMade = 1; ; attemptsMade += 1) {
      const next = nextState(input({ attemptsMade }));
      if (next.kind !== 'retry') {
        expect(next).toEqual({ kind: 'dead_letter', reason: 'retries_exhausted' });
        expect(attemptsMade).toBe(6);
        break;
      }
      gaps.push(next.inMs / 1000);
    }
    expect(gaps).toEqual([60, 120, 240, 480, 480]);
  });
});

describe('outcomes other than a retryable failure', () => {
  it.each([1, 3, 6, 7])('a 2xx at attempt %i is delivered', (attemptsMade) => {
    expect(nextState(input({ classification: 'delivered', attemptsMade }))).toEqual({
      kind: 'delivered',
    });
  });

  it.each([1, 4, 6])('a 4xx at attempt %i dead-letters at once as rejected', (attemptsMade) => {
    expect(nextState(input({ classification: 'rejected', attemptsMade }))).toEqual({
      kind: 'dead_letter',
      reason: 'rejected',
    });
  });
});

describe('a 410 under retry.disableOnGone', () => {
  it.each([1, 4, 6, 7])(
    'at attempt %i suspends the webhook, whatever delays are left, and is recorded suspended',
    (attemptsMade) => {
      const next = nextState(input({ classification: 'gone', attemptsMade }));
      expect(next).toEqual({ kind: 'suspend' });
      expect(outcomeOf(next)).toBe('suspended');
    },
  );

  it('leaves every other outcome named as before', () => {
    expect(outcomeOf({ kind: 'delivered' })).toBe('delivered');
    expect(outcomeOf({ kind: 'retry', inMs: 1 })).toBe('retry');
    expect(outcomeOf({ kind: 'dead_letter', reason: 'rejected' })).toBe('rejected');
    expect(outcomeOf({ kind: 'dead_letter', reason: 'retries_exhausted' })).toBe('retries_exhausted');
  });
});

describe("the delivery window is not the policy's to apply", () => {
  // The database applies it by its own clock as it writes the result
  // (asset_webhooks.transition_payloads; see test/lifecycle/window.test.ts).
  it('returns the same delay however long the series has run', () => {
    expect(nextState(input({ attemptsMade: 2 }))).toEqual({ kind: 'retry', inMs: 120_000 });
  });

  it('retries_exhausted is decided without a clock', () => {
    expect(nextState(input({ attemptsMade: 6 }))).toEqual({ kind: 'dead_letter', reason: 'retries_exhausted' });
  });
});

describe('other schedules', () => {
  it('an empty schedule dead-letters the first failure as retries_exhausted', () => {
    expect(nextState(input({ attemptsMade: 1, delaysSeconds: [] }))).toEqual({
      kind: 'dead_letter',
      reason: 'retries_exhausted',
    });
  });

  it('a single delay allows one retry', () => {
    expect(nextState(input({ attemptsMade: 1, delaysSeconds: [5] }))).toEqual({ kind: 'retry', inMs: 5000 });
    expect(nextState(input({ attemptsMade: 2, delaysSeconds: [5] }))).toEqual({
      kind: 'dead_letter',
      reason: 'retries_exhausted',
    });
  });
});

describe('a caller bug is an exception, not an outcome', () => {
  it.each([0, -1, 1.5, Number.NaN])('attemptsMade %s is refused', (attemptsMade) => {
    expect(() => nextState(input({ attemptsMade }))).toThrow(/expected attemptsMade to be an integer of at least 1/);
  });
});
