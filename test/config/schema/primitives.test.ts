import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/**
 * src/config/schema/primitives.ts: the building blocks, through keys that use
 * them: integer ranges (intRange), text PostgreSQL can store (storableString)
 * and non-empty strings (nonEmptyString).
 */
const { refuses, reads } = useSchemaTable();
const webhook = (config: Config) => config.assetUpdater.webhooks[0]!;
const at = 'assetUpdater.webhooks[0]';
const UNSTORABLE = 'expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store';

describe('intRange: an integer, both ends included, in one message for every wrong value', () => {
  const line = (found: string) => `${at}.batchSize: expected an integer from 1 to 100, got ${found}`;
  reads([['a whole number written as 5.0', { webhook: { batchSize: 5.0 } }, (c) => webhook(c).batchSize, 5]]);
  refuses([
    ['a fraction', { webhook: { batchSize: 1.5 } }, line('1.5')],
    ['a negative number', { webhook: { batchSize: -1 } }, line('-1')],
    ['an infinite number (1e400)', { webhook: { batchSize: Infinity } }, line('Infinity')],
    [
      'a huge number, one line for both of its problems',
      { webhook: { batchSize: 1e20 } },
      line('100000000000000000000'),
    ],
    ['a list', { webhook: { batchSize: [1] } }, line('a list [1]')],
    ['a mapping', { webhook: { batchSize: { size: 1 } } }, line('a mapping')],
  ]);
});

describe('storableString: no NUL and no unpaired surrogate, wherever the string is', () => {
  reads([
    [
      'a paired surrogate (an emoji)',
      { webhook: { resourceTypes: ['Asset \u{1F4F7}'] } },
      (c) => webhook(c).resourceTypes,
      ['Asset \u{1F4F7}'],
    ],
  ]);
  refuses([
    [
      'a NUL in a resource type',
      { webhook: { resourceTypes: ['a\u0000b'] } },
      `${at}.resourceTypes[0]: ${UNSTORABLE}, got a NUL character at position 2 of "a\\u0000b"`,
    ],
    [
      'an unpaired high surrogate in an apikey',
      { webhook: { apikey: 'key\ud800' } },
      `${at}.apikey: ${UNSTORABLE}, got an unpaired surrogate at position 4 of "key\\ud800"`,
    ],
    [
      'an unpaired low surrogate in a filter value',
      { webhook: { filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['\udc00x'] }] } },
      `${at}.filters[0].value[0]: ${UNSTORABLE}, got an unpaired surrogate at position 1 of "\\udc00x"`,
    ],
    [
      'a NUL in a secrets directory',
      { settings: { secrets: { provider: 'file', directory: '/run/\u0000' } } },
      `assetUpdater.secrets.directory: ${UNSTORABLE}, got a NUL character at position 6 of "/run/\\u0000"`,
    ],
  ]);
});

describe('nonEmptyString: a string of at least one character', () => {
  reads([['one character', { webhook: { apikey: 'k' } }, (c) => webhook(c).apikey, 'k']]);
  refuses([
    ['an empty string', { webhook: { apikey: '' } }, `${at}.apikey: expected a non-empty string, got ""`],
    ['a boolean', { webhook: { apikey: true } }, `${at}.apikey: expected a non-empty string, got true`],
    ['null', { webhook: { apikey: null } }, `${at}.apikey: expected a non-empty string, got null`],
  ]);
});
