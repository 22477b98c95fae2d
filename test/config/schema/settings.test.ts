import { describe } from 'vitest';
import { useSchemaTable, type Config, type Refused } from './documents.js';

/** src/config/schema.ts: the document's root and the settings of `assetUpdater`. */
const { refuses, reads } = useSchemaTable();
const settings = (config: Config) => config.assetUpdater;

const RANGES = [
  ['intervalSeconds', 1, 3600, 60],
  ['maxPayloadBytes', 1024, 16_777_216, 16_777_216],
  ['requestTimeoutSeconds', 1, 300, 30],
  ['maxRequestsInFlight', 1, 10_000, 256],
  ['retentionDays', 1, 365, 14],
] as const;

describe.each(RANGES)('assetUpdater.%s: an integer %i..%i, default %i', (key, min, max, fallback) => {
  const line = (found: string) => `assetUpdater.${key}: expected an integer from ${min} to ${max}, got ${found}`;
  reads([
    ['the default', {}, (c) => settings(c)[key], fallback],
    ['the minimum', { settings: { [key]: min } }, (c) => settings(c)[key], min],
    ['the maximum', { settings: { [key]: max } }, (c) => settings(c)[key], max],
  ]);
  refuses([
    ['one below the minimum', { settings: { [key]: min - 1 } }, line(String(min - 1))],
    ['one above the maximum', { settings: { [key]: max + 1 } }, line(String(max + 1))],
    ['a fraction', { settings: { [key]: min + 0.5 } }, line(String(min + 0.5))],
    ['a number as a string', { settings: { [key]: String(min) } }, line(`"${min}"`)],
    ['null', { settings: { [key]: null } }, line('null')],
    ['a boolean', { settings: { [key]: true } }, line('true')],
  ] satisfies Refused[]);
});

describe('assetUpdater.webhooks: a list of webhooks, required, empty allowed', () => {
  reads([['an empty list', { settings: { webhooks: [] } }, (c) => settings(c).webhooks, []]]);
  refuses([
    ['none', { settings: { webhooks: undefined } }, 'assetUpdater.webhooks: expected a list of webhooks, got nothing'],
  ]);
});

describe('the root: only assetUpdater', () => {
  refuses([
    [
      'an unknown root key',
      { root: { assetUpdate: {} } },
      'assetUpdate: expected the root key "assetUpdater", got unknown key "assetUpdate"',
    ],
    [
      'assetUpdater that is not a mapping',
      { root: { assetUpdater: 'x' } },
      'assetUpdater: expected a mapping, got "x"',
    ],
  ]);
});

describe('assetUpdater: its shape and unknown keys', () => {
  refuses([
    [
      'an unknown key (a typo)',
      { settings: { intervalSecond: 5 } },
      'assetUpdater.intervalSecond: expected no such key (check the spelling), got unknown key "intervalSecond"',
    ],
    [
      'webhooks that are not a list',
      { settings: { webhooks: { crm: {} } } },
      'assetUpdater.webhooks: expected a list of webhooks, got a mapping',
    ],
  ]);
});
