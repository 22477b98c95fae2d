import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/** src/config/schema/rate-limit.ts: a webhook's `rateLimit`. */
const { refuses, reads } = useSchemaTable();
const rateLimit = (config: Config) => config.assetUpdater.webhooks[0]!.rateLimit;
const at = 'assetUpdater.webhooks[0].rateLimit';
const perSecondLine = (found: string) =>
  `${at}.perSecond: expected a number of requests per second above 0, at most 10000, got ${found}`;

describe('rateLimit: defaults', () => {
  reads([
    ['left out: no limit', {}, rateLimit, undefined],
    [
      'perSecond alone: burst one second of it, not adaptive',
      { webhook: { rateLimit: { perSecond: 20 } } },
      rateLimit,
      { perSecond: 20, burst: 20, adaptive: false },
    ],
    [
      'a fractional perSecond: burst rounded up',
      { webhook: { rateLimit: { perSecond: 2.5 } } },
      rateLimit,
      { perSecond: 2.5, burst: 3, adaptive: false },
    ],
    [
      'below 1/s: burst at least 1',
      { webhook: { rateLimit: { perSecond: 0.2 } } },
      rateLimit,
      { perSecond: 0.2, burst: 1, adaptive: false },
    ],
    [
      'every key given',
      { webhook: { rateLimit: { perSecond: 10_000, burst: 1, adaptive: true } } },
      rateLimit,
      { perSecond: 10_000, burst: 1, adaptive: true },
    ],
  ]);
});

describe('rateLimit: what it refuses', () => {
  refuses([
    ['a perSecond of 0', { webhook: { rateLimit: { perSecond: 0 } } }, perSecondLine('0')],
    ['a negative perSecond', { webhook: { rateLimit: { perSecond: -5 } } }, perSecondLine('-5')],
    ['a perSecond above 10000', { webhook: { rateLimit: { perSecond: 10_001 } } }, perSecondLine('10001')],
    ['a perSecond as a string', { webhook: { rateLimit: { perSecond: '20' } } }, perSecondLine('"20"')],
    [
      'no perSecond',
      { webhook: { rateLimit: { burst: 5 } } },
      `${at}.perSecond: expected a number of requests per second above 0, at most 10000, got nothing`,
    ],
    [
      'a burst of 0',
      { webhook: { rateLimit: { perSecond: 20, burst: 0 } } },
      `${at}.burst: expected an integer from 1 to 10000, got 0`,
    ],
    [
      'a fractional burst',
      { webhook: { rateLimit: { perSecond: 20, burst: 1.5 } } },
      `${at}.burst: expected an integer from 1 to 10000, got 1.5`,
    ],
    [
      'adaptive as a string',
      { webhook: { rateLimit: { perSecond: 20, adaptive: 'yes' } } },
      `${at}.adaptive: expected true or false, got "yes"`,
    ],
    [
      'a number for the mapping',
      { webhook: { rateLimit: 20 } },
      `${at}: expected a mapping with the keys perSecond, burst and adaptive, got 20`,
    ],
    [
      'an unknown key',
      { webhook: { rateLimit: { perSecond: 20, perMinute: 5 } } },
      `${at}.perMinute: expected no such key (check the spelling), got unknown key "perMinute"`,
    ],
  ]);
});
