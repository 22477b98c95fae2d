import { z } from 'zod';
import { intRange } from './primitives.js';

/** The highest rateLimit.perSecond and rateLimit.burst. */
export const MAX_RATE_PER_SECOND = 10_000;

const perSecondError = `expected a number of requests per second above 0, at most ${MAX_RATE_PER_SECOND}`;

/**
 * A webhook's `rateLimit`: the requests that all `run` processes together
 * send to it, at most `perSecond` on average and at most `burst` at once
 * after a quiet spell (a token bucket kept in the database, refilled by its
 * clock). Left out, `burst` is one second's worth: ceil(perSecond), at least
 * 1. With `adaptive`, a 429 or 503 answer halves the rate in force (not below
 * 1/s) and each further second with successes and no such answer regains a
 * tenth of perSecond (at least 1/s), up to perSecond.
 */
export const rateLimit = z
  .strictObject(
    {
      perSecond: z
        .number({ error: perSecondError })
        .positive({ error: perSecondError })
        .max(MAX_RATE_PER_SECOND, { error: perSecondError }),
      burst: intRange(1, MAX_RATE_PER_SECOND).optional(),
      adaptive: z.boolean({ error: 'expected true or false' }).default(false),
    },
    { error: 'expected a mapping with the keys perSecond, burst and adaptive' },
  )
  .transform(({ perSecond, burst, adaptive }) => ({
    perSecond,
    burst: burst ?? Math.max(1, Math.ceil(perSecond)),
    adaptive,
  }));

export type RateLimit = z.output<typeof rateLimit>;
