import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/** src/config/schema/retry.ts: `assetUpdater.retry`. */
const { refuses, reads } = useSchemaTable();
const retry = (config: Config) => config.assetUpdater.retry;
const at = 'assetUpdater.retry';

describe('retry: defaults', () => {
  reads([
    [
      'the section left out',
      {},
      retry,
      {
        delaysSeconds: [60, 120, 240, 480, 480],
        deadLetterAfterSeconds: 86_400,
        retryStatusCodes: [],
        honorRetryAfter: false,
        disableOnGone: false,
      },
    ],
    [
      'an empty section',
      { settings: { retry: {} } },
      retry,
      {
        delaysSeconds: [60, 120, 240, 480, 480],
        deadLetterAfterSeconds: 86_400,
        retryStatusCodes: [],
        honorRetryAfter: false,
        disableOnGone: false,
      },
    ],
  ]);
});

describe('retry.delaysSeconds: a list of 0 to 10 integers, each 1..86400', () => {
  reads([
    ['no delays (no retry)', { settings: { retry: { delaysSeconds: [] } } }, (c) => retry(c).delaysSeconds, []],
    [
      'ten delays',
      { settings: { retry: { delaysSeconds: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1] } } },
      (c) => retry(c).delaysSeconds.length,
      10,
    ],
    [
      'a delay of 1 and one of 86400',
      { settings: { retry: { delaysSeconds: [1, 86_400] } } },
      (c) => retry(c).delaysSeconds,
      [1, 86_400],
    ],
  ]);
  refuses([
    [
      'a delay of 0',
      { settings: { retry: { delaysSeconds: [0] } } },
      `${at}.delaysSeconds[0]: expected an integer from 1 to 86400, got 0`,
    ],
    [
      'a delay of 86401',
      { settings: { retry: { delaysSeconds: [60, 86_401] } } },
      `${at}.delaysSeconds[1]: expected an integer from 1 to 86400, got 86401`,
    ],
    [
      'a fractional delay',
      { settings: { retry: { delaysSeconds: [1.5] } } },
      `${at}.delaysSeconds[0]: expected an integer from 1 to 86400, got 1.5`,
    ],
    [
      'a delay as a string',
      { settings: { retry: { delaysSeconds: ['60'] } } },
      `${at}.delaysSeconds[0]: expected an integer from 1 to 86400, got "60"`,
    ],
    [
      'eleven delays',
      { settings: { retry: { delaysSeconds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] } } },
      `${at}.delaysSeconds: expected at most 10 retries, got a list [1,2,3,4,5,6,7,8,9,10,11]`,
    ],
    [
      'a number for the list',
      { settings: { retry: { delaysSeconds: 60 } } },
      `${at}.delaysSeconds: expected a list of delays in seconds, got 60`,
    ],
  ]);
});

describe('retry.deadLetterAfterSeconds: an integer 1..2592000', () => {
  reads([
    ['1', { settings: { retry: { deadLetterAfterSeconds: 1 } } }, (c) => retry(c).deadLetterAfterSeconds, 1],
    [
      '2592000 (30 days)',
      { settings: { retry: { deadLetterAfterSeconds: 2_592_000 } } },
      (c) => retry(c).deadLetterAfterSeconds,
      2_592_000,
    ],
  ]);
  refuses([
    [
      '0',
      { settings: { retry: { deadLetterAfterSeconds: 0 } } },
      `${at}.deadLetterAfterSeconds: expected an integer from 1 to 2592000, got 0`,
    ],
    [
      '2592001',
      { settings: { retry: { deadLetterAfterSeconds: 2_592_001 } } },
      `${at}.deadLetterAfterSeconds: expected an integer from 1 to 2592000, got 2592001`,
    ],
    [
      'null',
      { settings: { retry: { deadLetterAfterSeconds: null } } },
      `${at}.deadLetterAfterSeconds: expected an integer from 1 to 2592000, got null`,
    ],
  ]);
});

describe('retry.retryStatusCodes: a list of integers 400..499', () => {
  reads([
    [
      '400 and 499',
      { settings: { retry: { retryStatusCodes: [400, 499] } } },
      (c) => retry(c).retryStatusCodes,
      [400, 499],
    ],
  ]);
  refuses([
    [
      '399',
      { settings: { retry: { retryStatusCodes: [399] } } },
      `${at}.retryStatusCodes[0]: expected an integer from 400 to 499, got 399`,
    ],
    [
      '500',
      { settings: { retry: { retryStatusCodes: [429, 500] } } },
      `${at}.retryStatusCodes[1]: expected an integer from 400 to 499, got 500`,
    ],
    [
      'a code for the list',
      { settings: { retry: { retryStatusCodes: 429 } } },
      `${at}.retryStatusCodes: expected a list of status codes 400..499, got 429`,
    ],
  ]);
});

describe('retry.honorRetryAfter: a boolean', () => {
  reads([['true', { settings: { retry: { honorRetryAfter: true } } }, (c) => retry(c).honorRetryAfter, true]]);
  refuses([
    [
      '"yes"',
      { settings: { retry: { honorRetryAfter: 'yes' } } },
      `${at}.honorRetryAfter: expected true or false, got "yes"`,
    ],
    ['1', { settings: { retry: { honorRetryAfter: 1 } } }, `${at}.honorRetryAfter: expected true or false, got 1`],
  ]);
});

describe('retry.disableOnGone: a boolean', () => {
  reads([
    ['true', { settings: { retry: { disableOnGone: true } } }, (c) => retry(c).disableOnGone, true],
    ['false', { settings: { retry: { disableOnGone: false } } }, (c) => retry(c).disableOnGone, false],
  ]);
  refuses([
    [
      '"yes"',
      { settings: { retry: { disableOnGone: 'yes' } } },
      `${at}.disableOnGone: expected true or false, got "yes"`,
    ],
    ['1', { settings: { retry: { disableOnGone: 1 } } }, `${at}.disableOnGone: expected true or false, got 1`],
    ['null', { settings: { retry: { disableOnGone: null } } }, `${at}.disableOnGone: expected true or false, got null`],
    [
      'a list',
      { settings: { retry: { disableOnGone: [true] } } },
      `${at}.disableOnGone: expected true or false, got a list [true]`,
    ],
  ]);
});

describe('retry: its shape and unknown keys', () => {
  refuses([
    ['a list for the section', { settings: { retry: [] } }, `${at}: expected a mapping, got an empty list`],
    [
      'an unknown key (a typo)',
      { settings: { retry: { delaySeconds: [1] } } },
      `${at}.delaySeconds: expected no such key (check the spelling), got unknown key "delaySeconds"`,
    ],
  ]);
});
