import { describe, expect, it } from 'vitest';
import { nextState } from '../../src/delivery/policy/next-state.js';

const created = new Date('2026-11-22T00:00:00.000Z');
const delays = [60, 120, 240, 480, 480];
const at = (seconds: number): Date => new Date(created.getTime() + seconds * 1000);

describe('the retry schedule of the spec (1, 2, 4, 8, 8 minutes; five retries, six attempts)', () => {
  it.each([
    [1, 0, 60], [2, 60, 180], [3, 180, 420], [4, 420, 900], [5, 900, 1380],
  ])('attempt %i failing at +%is retries at +%is', (attempt, now, retryAt) => {
    expect(nextState({ classification: 'retryable', attemptsMade: attempt, createdAt: created, now: at(now), delaysSeconds: delays, deadLetterAfterSeconds: 86_400 }))
      .toEqual({ kind: 'retry', at: at(retryAt) });
  });

  it('the sixth failed attempt dead-letters as retries_exhausted', () => {
    expect(nextState({ classification: 'retryable', attemptsMade: 6, createdAt: created, now: at(1380), delaysSeconds: delays, deadLetterAfterSeconds: 86_400 }))
      .toEqual({ kind: 'dead_letter', reason: 'retries_exhausted' });
  });

  it('a 4xx dead-letters at once as rejected', () => {
    expect(nextState({ classification: 'rejected', attemptsMade: 1, createdAt: created, now: at(0), delaysSeconds: delays, deadLetterAfterSeconds: 86_400 }))
      .toEqual({ kind: 'dead_letter', reason: 'rejected' });
  });

  it('a 2xx at any attempt is delivered', () => {
    expect(nextState({ classification: 'delivered', attemptsMade: 6, createdAt: created, now: at(1380), delaysSeconds: delays, deadLetterAfterSeconds: 86_400 }))
      .toEqual({ kind: 'delivered' });
  });

  it('a retry that would fall after deadLetterAfterSeconds expires instead', () => {
    expect(nextState({ classification: 'retryable', attemptsMade: 2, createdAt: created, now: at(86_300), delaysSeconds: delays, deadLetterAfterSeconds: 86_400 }))
      .toEqual({ kind: 'dead_letter', reason: 'expired' });
  });
});
