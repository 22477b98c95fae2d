import { describe } from 'vitest';
import { BASE_WEBHOOK, useSchemaTable, type Config, type Refused } from './documents.js';

/** src/config/schema/webhook.ts: one entry of `assetUpdater.webhooks`, and the ids of all of them. */
const { refuses, reads } = useSchemaTable();
const webhook = (config: Config) => config.assetUpdater.webhooks[0]!;
const at = 'assetUpdater.webhooks[0]';
const ALL_EVENT_TYPES = ['CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'];

describe('a webhook: defaults', () => {
  reads([
    [
      'every optional key left out',
      {},
      webhook,
      {
        id: 'crm',
        idFromUrl: false,
        url: 'https://receiver.example/a',
        enabled: true,
        paused: false,
        resourceTypes: ['Resource'],
        eventTypes: ALL_EVENT_TYPES,
        batchSize: 100,
        concurrency: 1,
        filters: [],
        mirror: false,
      },
    ],
  ]);
});

describe('id: 1 to 64 characters A-Z a-z 0-9 _ . -, unique; derived from the url when left out', () => {
  reads([
    ['one character', { webhook: { id: 'a' } }, (c) => webhook(c).id, 'a'],
    [
      '64 characters of every kind allowed',
      { webhook: { id: `Az09_.-${'x'.repeat(57)}` } },
      (c) => webhook(c).id.length,
      64,
    ],
    // sha256("https://receiver.example/a") begins 50155c38a274.
    [
      'the id derived from the url',
      { webhook: { id: undefined } },
      (c) => [webhook(c).id, webhook(c).idFromUrl],
      ['webhook-50155c38a274', true],
    ],
  ]);
  const expected = 'expected an id of 1 to 64 characters A-Z a-z 0-9 _ . -';
  refuses([
    ['an empty id', { webhook: { id: '' } }, `${at}.id: ${expected}, got ""`],
    ['65 characters', { webhook: { id: 'x'.repeat(65) } }, `${at}.id: ${expected}, got "${'x'.repeat(40)}"...`],
    ['a space', { webhook: { id: 'my crm' } }, `${at}.id: ${expected}, got "my crm"`],
    ['a slash', { webhook: { id: 'crm/1' } }, `${at}.id: ${expected}, got "crm/1"`],
    ['a number', { webhook: { id: 7 } }, `${at}.id: ${expected}, got 7`],
    [
      'an id given twice',
      { settings: { webhooks: [BASE_WEBHOOK, { ...BASE_WEBHOOK, url: 'https://other.example/' }] } },
      'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same), got "crm"',
    ],
    [
      'a url given twice without ids',
      {
        settings: {
          webhooks: [
            { url: 'https://receiver.example/a', enabled: true },
            { url: 'https://receiver.example/a', enabled: false },
          ],
        },
      },
      'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same; this one is derived from the url, set an id), got "webhook-50155c38a274"',
    ],
  ]);
});

describe('url and enabled: required', () => {
  refuses([
    ['no url', { webhook: { url: undefined } }, `${at}.url: expected an http or https URL, got nothing`],
    ['no enabled', { webhook: { enabled: undefined } }, `${at}.enabled: expected true or false, got nothing`],
    ['enabled as a string', { webhook: { enabled: 'yes' } }, `${at}.enabled: expected true or false, got "yes"`],
  ]);
});

describe('paused and mirror: booleans, default false', () => {
  reads([
    ['paused: true', { webhook: { paused: true } }, (c) => webhook(c).paused, true],
    ['mirror: true', { webhook: { mirror: true } }, (c) => webhook(c).mirror, true],
  ]);
  refuses([
    ['paused: 1', { webhook: { paused: 1 } }, `${at}.paused: expected true or false, got 1`],
    ['mirror: "no"', { webhook: { mirror: 'no' } }, `${at}.mirror: expected true or false, got "no"`],
  ]);
});

describe('apikey and signing.secret: secret names, non-empty', () => {
  reads([
    ['an apikey', { webhook: { apikey: 'crm-api-key' } }, (c) => webhook(c).apikey, 'crm-api-key'],
    [
      'a signing secret',
      { webhook: { signing: { secret: 'crm-signing' } } },
      (c) => webhook(c).signing,
      { secret: 'crm-signing' },
    ],
  ]);
  refuses([
    ['an empty apikey', { webhook: { apikey: '' } }, `${at}.apikey: expected a non-empty string, got ""`],
    ['an apikey that is a number', { webhook: { apikey: 5 } }, `${at}.apikey: expected a non-empty string, got 5`],
    [
      'signing as a string',
      { webhook: { signing: 'crm-signing' } },
      `${at}.signing: expected a mapping with the key secret, got "crm-signing"`,
    ],
    [
      'signing without secret',
      { webhook: { signing: {} } },
      `${at}.signing.secret: expected a non-empty string, got nothing`,
    ],
    [
      'an unknown key of signing',
      { webhook: { signing: { secret: 's', algorithm: 'v1' } } },
      `${at}.signing.algorithm: expected no such key (check the spelling), got unknown key "algorithm"`,
    ],
  ]);
});

describe('resourceTypes: a non-empty list of non-empty strings, kept as written', () => {
  reads([
    [
      'types as written',
      { webhook: { resourceTypes: ['Project', 'resource', 'Custom Type'] } },
      (c) => webhook(c).resourceTypes,
      ['Project', 'resource', 'Custom Type'],
    ],
  ]);
  refuses([
    [
      'an empty list',
      { webhook: { resourceTypes: [] } },
      `${at}.resourceTypes: expected at least one resource type, got an empty list`,
    ],
    [
      'a string for the list',
      { webhook: { resourceTypes: 'Resource' } },
      `${at}.resourceTypes: expected a list of supertypes, got "Resource"`,
    ],
    [
      'an empty type',
      { webhook: { resourceTypes: ['Resource', ''] } },
      `${at}.resourceTypes[1]: expected a non-empty string, got ""`,
    ],
  ]);
});

describe('eventTypes: a non-empty list of the event types, any case; Unmatched only on a mirror', () => {
  reads([
    [
      'names in any case, in payload form',
      { webhook: { eventTypes: ['created', 'EDITED', 'pUrGeD'] } },
      (c) => webhook(c).eventTypes,
      ['CREATED', 'EDITED', 'PURGED'],
    ],
    [
      'Unmatched on a mirror, which gets it whether listed or not',
      { webhook: { mirror: true, eventTypes: ['Created', 'Edited', 'Deleted', 'Purged', 'Unmatched'] } },
      (c) => webhook(c).eventTypes,
      ['CREATED', 'EDITED', 'DELETED', 'PURGED'],
    ],
  ]);
  refuses([
    [
      'an empty list',
      { webhook: { eventTypes: [] } },
      `${at}.eventTypes: expected at least one event type, got an empty list`,
    ],
    [
      'an unknown type',
      { webhook: { eventTypes: ['Created', 'Renamed'] } },
      `${at}.eventTypes[1]: expected one of Created, Edited, Deleted, Purged, Reversion, Unmatched (any case), got "Renamed"`,
    ],
    [
      'a number',
      { webhook: { eventTypes: [3] } },
      `${at}.eventTypes[0]: expected one of Created, Edited, Deleted, Purged, Reversion, Unmatched, got 3`,
    ],
    [
      'a string for the list',
      { webhook: { eventTypes: 'Created' } },
      `${at}.eventTypes: expected a list of Created, Edited, Deleted, Purged, Reversion, Unmatched, got "Created"`,
    ],
    [
      'Unmatched without mirror',
      { webhook: { eventTypes: ['Created', 'Unmatched'] } },
      `${at}.eventTypes: expected Unmatched only on a webhook with mirror: true (only mirror webhooks receive it), got "Unmatched"`,
    ],
    [
      'a mirror without Deleted and Purged',
      { webhook: { mirror: true, eventTypes: ['created', 'Edited', 'Reversion'] } },
      `${at}.eventTypes: expected the event types of a mirror webhook to include Created, Edited, Deleted and Purged (missing: Deleted, Purged), got a list ["Created","Edited","Reversion"]`,
    ],
  ]);
});

describe.each([
  ['batchSize', 1, 100],
  ['concurrency', 1, 64],
] as const)('%s: an integer %i..%i', (key, min, max) => {
  const line = (found: string) => `${at}.${key}: expected an integer from ${min} to ${max}, got ${found}`;
  reads([
    ['the minimum', { webhook: { [key]: min } }, (c) => webhook(c)[key], min],
    ['the maximum', { webhook: { [key]: max } }, (c) => webhook(c)[key], max],
  ]);
  refuses([
    ['one below the minimum', { webhook: { [key]: min - 1 } }, line(String(min - 1))],
    ['one above the maximum', { webhook: { [key]: max + 1 } }, line(String(max + 1))],
    ['a number as a string', { webhook: { [key]: '10' } }, line('"10"')],
  ] satisfies Refused[]);
});

describe('filters: a list of filter groups', () => {
  refuses([
    [
      'a mapping for the list',
      { webhook: { filters: {} } },
      `${at}.filters: expected a list of filter groups, got a mapping`,
    ],
  ]);
});

describe('a webhook: its shape and unknown keys', () => {
  refuses([
    [
      'a string for the webhook',
      { settings: { webhooks: ['https://receiver.example/a'] } },
      'assetUpdater.webhooks[0]: expected a mapping, got "https://receiver.example/a"',
    ],
    [
      'an unknown key (a typo)',
      { webhook: { eventType: ['Created'] } },
      `${at}.eventType: expected no such key (check the spelling), got unknown key "eventType"`,
    ],
    [
      'a key in the wrong case',
      { webhook: { Enabled: true } },
      `${at}.Enabled: expected no such key (check the spelling), got unknown key "Enabled"`,
    ],
  ]);
});
