import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { configFromEnvOrOption, loadConfigFile, parseConfigText } from '../../src/config/load.js';
import { redactedUrl, type SecretsConfig } from '../../src/config/schema.js';
import { UserError } from '../../src/errors.js';
import { badDocuments } from './bad-documents.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

const oneWebhook = (webhookFields: string, top = ''): string =>
  `assetUpdater:\n${top}  webhooks:\n    - { url: "https://receiver.example/a", enabled: true${webhookFields ? `, ${webhookFields}` : ''} }\n`;

const settings = (webhookFields: string, top = '') =>
  parseConfigText(oneWebhook(webhookFields, top), 'test').assetUpdater;

/** The problems of a document that must be refused. */
function problems(text: string): readonly string[] {
  try {
    parseConfigText(text, 'config.yaml');
  } catch (error) {
    if (error instanceof UserError && error.code === 'config_invalid') return error.problems;
    throw error;
  }
  throw new Error('the document was accepted');
}

describe('defaults: a key left out takes the default docs/configuration.md gives', () => {
  it('fills every extension default', () => {
    expect(settings('')).toMatchObject({
      intervalSeconds: 60,
      maxPayloadBytes: 16_777_216,
      requestTimeoutSeconds: 30,
      retentionDays: 14,
      retry: {
        delaysSeconds: [60, 120, 240, 480, 480],
        deadLetterAfterSeconds: 86_400,
        retryStatusCodes: [],
        honorRetryAfter: false,
        disableOnGone: false,
      },
      network: { allowPrivateAddresses: false },
      secrets: { provider: 'env', cacheSeconds: 300 },
    });
  });

  it('fills the webhook defaults: only Resource, all event types, no filters, batches of 100, one in flight', () => {
    expect(settings('').webhooks[0]).toMatchObject({
      resourceTypes: ['Resource'],
      eventTypes: ['CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'],
      filters: [],
      batchSize: 100,
      concurrency: 1,
    });
  });

  it('does not share default lists between webhooks or documents', () => {
    const first = settings('');
    first.webhooks[0]!.resourceTypes.push('Project');
    first.retry.delaysSeconds.push(1);
    const second = settings('');
    expect(second.webhooks[0]!.resourceTypes).toEqual(['Resource']);
    expect(second.retry.delaysSeconds).toEqual([60, 120, 240, 480, 480]);
  });

  it('fills a section left out, empty or given in part with the same defaults, key by key', () => {
    const omitted = settings('');
    const empty = settings('', '  retry: {}\n  network: {}\n  secrets: {}\n');
    expect([empty.retry, empty.network, empty.secrets]).toEqual([omitted.retry, omitted.network, omitted.secrets]);
    const partial = settings(
      '',
      '  retry: { honorRetryAfter: true }\n  network: { proxy: "http://proxy.internal:3128" }\n  secrets: { cacheSeconds: 5 }\n',
    );
    expect(partial.retry).toEqual({ ...omitted.retry, honorRetryAfter: true });
    expect(partial.network).toEqual({ ...omitted.network, proxy: 'http://proxy.internal:3128' });
    expect(partial.secrets).toEqual({ ...omitted.secrets, cacheSeconds: 5 });
  });

  it('derives the default id from the SHA-256 of the url', () => {
    // sha256("https://receiver.example/a") begins 50155c38a274.
    expect(settings('').webhooks[0]!.id).toBe('webhook-50155c38a274');
    expect(createHash('sha256').update('https://receiver.example/a').digest('hex').slice(0, 12)).toBe('50155c38a274');
  });

  it('keeps a given id', () => {
    expect(settings('id: crm.v2_x-1').webhooks[0]!.id).toBe('crm.v2_x-1');
  });
});

describe('normalization', () => {
  it('matches event type names case-insensitively and gives them in payload form', () => {
    expect(settings('eventTypes: [created, EDITED, Deleted, pUrGeD, Reversion]').webhooks[0]!.eventTypes).toEqual([
      'CREATED',
      'EDITED',
      'DELETED',
      'PURGED',
      'REVERSION',
    ]);
  });

  it('reads mirror (default false), accepts Unmatched on a mirror webhook and keeps it out of the routed event types', () => {
    expect(settings('').webhooks[0]!.mirror).toBe(false);
    const mirrored = settings('mirror: true, eventTypes: [Created, Edited, Deleted, Purged, unmatched]').webhooks[0]!;
    expect(mirrored.mirror).toBe(true);
    expect(mirrored.eventTypes).toEqual(['CREATED', 'EDITED', 'DELETED', 'PURGED']);
    expect(settings('mirror: true').webhooks[0]!.eventTypes).toHaveLength(5);
  });

  it('keeps resource types as written (they match exactly)', () => {
    expect(settings('resourceTypes: [Project, resource, Custom Type]').webhooks[0]!.resourceTypes).toEqual([
      'Project',
      'resource',
      'Custom Type',
    ]);
  });

  it('accepts an empty retry schedule (no retries) and up to ten delays', () => {
    expect(settings('', '  retry: { delaysSeconds: [] }\n').retry.delaysSeconds).toEqual([]);
    expect(
      settings('', '  retry: { delaysSeconds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] }\n').retry.delaysSeconds,
    ).toHaveLength(10);
  });

  it('reads retry.honorRetryAfter as a real boolean, independent of retryStatusCodes', () => {
    expect(settings('', '  retry: { honorRetryAfter: true }\n').retry).toMatchObject({
      honorRetryAfter: true,
      retryStatusCodes: [],
    });
    expect(settings('', '  retry: { retryStatusCodes: [429] }\n').retry.honorRetryAfter).toBe(false);
    expect(problems(oneWebhook('', '  retry: { honorRetryAfter: "yes" }\n'))).toEqual([
      'assetUpdater.retry.honorRetryAfter: expected true or false, got "yes"',
    ]);
  });

  it('accepts ordinary custom headers, values with spaces and punctuation', () => {
    const webhook = settings('headers: { X-Tenant: acme, Authorization-Hint: "a b;c" }').webhooks[0]!;
    expect(webhook.headers).toEqual({ 'X-Tenant': 'acme', 'Authorization-Hint': 'a b;c' });
  });
});

describe('ranges: both ends accepted, one beyond refused', () => {
  it.each([
    ['intervalSeconds', 1, 3600],
    ['maxPayloadBytes', 1024, 16_777_216],
    ['requestTimeoutSeconds', 1, 300],
    ['retentionDays', 1, 365],
  ] as const)('%s from %i to %i', (key, min, max) => {
    expect(settings('', `  ${key}: ${min}\n`)[key]).toBe(min);
    expect(settings('', `  ${key}: ${max}\n`)[key]).toBe(max);
    expect(problems(oneWebhook('', `  ${key}: ${min - 1}\n`))).toEqual([
      `assetUpdater.${key}: expected an integer from ${min} to ${max}, got ${min - 1}`,
    ]);
    expect(problems(oneWebhook('', `  ${key}: ${max + 1}\n`))).toEqual([
      `assetUpdater.${key}: expected an integer from ${min} to ${max}, got ${max + 1}`,
    ]);
  });

  it.each([
    ['batchSize', 1, 100],
    ['concurrency', 1, 64],
  ] as const)('webhook %s from %i to %i', (key, min, max) => {
    expect(settings(`${key}: ${min}`).webhooks[0]![key]).toBe(min);
    expect(settings(`${key}: ${max}`).webhooks[0]![key]).toBe(max);
    expect(problems(oneWebhook(`${key}: ${min - 1}`))).toEqual([
      `assetUpdater.webhooks[0].${key}: expected an integer from ${min} to ${max}, got ${min - 1}`,
    ]);
    expect(problems(oneWebhook(`${key}: ${max + 1}`))).toEqual([
      `assetUpdater.webhooks[0].${key}: expected an integer from ${min} to ${max}, got ${max + 1}`,
    ]);
  });
});

describe('headers the service sets itself are refused in any case', () => {
  it.each([
    'Content-Type',
    'content-type',
    'X-API-Key',
    'x-api-key',
    'Host',
    'host',
    'Content-Length',
    'CONTENT-LENGTH',
  ])('%s', (name) => {
    expect(problems(oneWebhook(`headers: { "${name}": x }`))).toEqual([
      `assetUpdater.webhooks[0].headers${/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? `.${name}` : `["${name}"]`}: expected a header other than Content-Type, X-API-Key, Host or Content-Length (the service sets those), got "${name}"`,
    ]);
  });
});

describe('secrets settings', () => {
  it.each<[string, string, SecretsConfig]>([
    ['env', '{ provider: env }', { provider: 'env', cacheSeconds: 300 }],
    [
      'file',
      '{ provider: file, directory: /run/secrets, cacheSeconds: 0 }',
      { provider: 'file', cacheSeconds: 0, directory: '/run/secrets' },
    ],
    [
      'gcp',
      '{ provider: gcp, gcp: { projectId: my-project, apiEndpoint: "localhost:8443" } }',
      { provider: 'gcp', cacheSeconds: 300, gcp: { projectId: 'my-project', apiEndpoint: 'localhost:8443' } },
    ],
    [
      'aws',
      '{ provider: aws, aws: { region: eu-west-1, endpoint: "http://127.0.0.1:4566" } }',
      { provider: 'aws', cacheSeconds: 300, aws: { region: 'eu-west-1', endpoint: 'http://127.0.0.1:4566' } },
    ],
  ])('provider %s with its settings', (_name, yaml, expected) => {
    expect(settings('', `  secrets: ${yaml}\n`).secrets).toEqual(expected);
  });
});

describe('every kind of bad document is refused with its exact problem line', () => {
  it.each(badDocuments)('%s', (_what, text, expected) => {
    const lines = problems(text);
    expect(
      lines.some((line) => line.includes(expected)),
      `${expected}\nnot in\n${lines.join('\n')}`,
    ).toBe(true);
  });
});

describe('problems', () => {
  it('reports a duplicate id together with every other problem', () => {
    expect(
      problems(
        'assetUpdater:\n  retentionDays: 0\n  webhooks:\n    - { id: a, url: "https://a.example/", enabled: true }\n    - { id: a, url: "https://b.example/", enabled: true }\n    - { url: "ftp://c.example/", enabled: true }\n',
      ),
    ).toEqual([
      'assetUpdater.retentionDays: expected an integer from 1 to 365, got 0',
      'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same), got "a"',
      'assetUpdater.webhooks[2].url: expected an http or https URL, got "ftp://c.example/"',
    ]);
  });

  it('names the source for a problem with the whole document', () => {
    expect(problems('[1, 2]')).toEqual([
      'config.yaml: expected a mapping with the root key "assetUpdater", got a list of 2 entries (not shown)',
    ]);
    expect(problems('assetUpdater:\n')).toEqual(['assetUpdater: expected a mapping, got null']);
  });

  it('places an unknown key among the problems where it is written', () => {
    expect(
      problems('assetUpdater:\n  webhooks:\n    - { url: "x", eventType: [Created], enabled: true, batchSize: 0 }\n'),
    ).toEqual([
      'assetUpdater.webhooks[0].url: expected an http or https URL, got "x"',
      'assetUpdater.webhooks[0].eventType: expected no such key (check the spelling), got unknown key "eventType"',
      'assetUpdater.webhooks[0].batchSize: expected an integer from 1 to 100, got 0',
    ]);
  });

  it('refuses a document whose aliases expand without bound, as a problem line', () => {
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x]']
      .concat(
        ['b', 'c', 'd', 'e'].map(
          (name, index) => `${name}: &${name} [${Array(9).fill(`*${'abcd'[index]}`).join(', ')}]`,
        ),
      )
      .join('\n');
    expect(problems(bomb)).toEqual([
      expect.stringMatching(/^config\.yaml: expected a YAML document of ordinary size, got .*alias/i),
    ]);
  });

  it('reports every problem of a headers mapping at once, not only the wrongly typed value', () => {
    expect(problems(oneWebhook('headers: { "Bad Name": v, X-A: "a\\r\\nb", X-C: 5 }'))).toEqual([
      'assetUpdater.webhooks[0].headers["Bad Name"]: expected a header name made of HTTP token characters, got "Bad Name"',
      'assetUpdater.webhooks[0].headers["X-A"]: expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF, got a value with "\\r" at position 2 (the value is not shown: it may be secret)',
      'assetUpdater.webhooks[0].headers["X-C"]: expected a string header value, got 5',
    ]);
  });

  it('reports an apikey that provider file could never read together with the other problems', () => {
    expect(
      problems(
        oneWebhook(
          'apikey: ../outside.txt',
          '  retentionDays: soon\n  secrets: { provider: file, directory: /run/secrets }\n',
        ),
      ),
    ).toEqual([
      'assetUpdater.retentionDays: expected an integer from 1 to 365, got "soon"',
      'assetUpdater.webhooks[0].apikey: expected a file name without path separators, NUL, "." or ".." (secrets provider file), got "../outside.txt"',
    ]);
  });

  it('reports every problem of a filter value list at once', () => {
    expect(
      problems(oneWebhook('filters: [ { filterKind: schemaId, condition: ANY, value: [12, "1.5", abc] } ]')),
    ).toEqual([
      'assetUpdater.webhooks[0].filters[0].value[0]: expected a string (quote numbers: "2026"), got 12',
      'assetUpdater.webhooks[0].filters[0].value[1]: expected a string of digits without leading zeros, got "1.5"',
      'assetUpdater.webhooks[0].filters[0].value[2]: expected a string of digits without leading zeros, got "abc"',
    ]);
  });

  it('writes a number too large for JavaScript as Infinity, once', () => {
    expect(problems(oneWebhook('', '  intervalSeconds: 1e400\n'))).toEqual([
      'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got Infinity',
    ]);
    expect(problems(oneWebhook('', '  intervalSeconds: 99999999999999999999999\n'))).toEqual([
      'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 1e+23',
    ]);
  });

  it('names a null key in place of the schema\'s unknown key "", with every other problem, in document order', () => {
    const document =
      'assetUpdater:\n  webhooks:\n    - url: "https://receiver.example/a"\n      enabled: true\n      batchSize: ten\n      headers: { ~: v, X-Tenant: a }\n      concurrency: 0\n';
    expect(problems(document)).toEqual([
      'assetUpdater.webhooks[0].batchSize: expected an integer from 1 to 100, got "ten"',
      'assetUpdater.webhooks[0].headers: expected key names, got ~, which YAML reads as no name (write "~" to use the word as a key)',
      'assetUpdater.webhooks[0].concurrency: expected an integer from 1 to 64, got 0',
    ]);
  });

  it('names an alias without its anchor as such', () => {
    expect(problems('assetUpdater:\n  webhooks: *nope\n')).toEqual([
      expect.stringMatching(
        /^config\.yaml: expected every alias to name an anchor set before it, got Unresolved alias.*nope/,
      ),
    ]);
  });

  it('refuses a key that is a list without a warning of the YAML library on stderr', () => {
    const warn = vi.spyOn(process, 'emitWarning');
    try {
      expect(problems(oneWebhook('headers: { [a, b]: abc }'))).toEqual([
        expect.stringMatching(
          /^assetUpdater\.webhooks\[0\]\.headers\[.*\]: expected a header name made of HTTP token characters/,
        ),
      ]);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  it('lists the first 100 problems and counts the rest in one line', () => {
    const values = Array.from({ length: 250 }, (_, index) => index).join(', ');
    const lines = problems(oneWebhook(`filters: [ { filterKind: keywords, condition: ANY, value: [${values}] } ]`));
    expect(lines).toHaveLength(101);
    expect(lines[99]).toBe(
      'assetUpdater.webhooks[0].filters[0].value[99]: expected a string (quote numbers: "2026"), got 99',
    );
    expect(lines[100]).toBe(
      'config.yaml: expected at most 100 problems to list, got 250; 150 more are not shown (fix these and check again)',
    );
  });

  it('shortens a long value it quotes', () => {
    const [line] = problems(oneWebhook('', `  intervalSeconds: "${'x'.repeat(200)}"\n`));
    expect(line!.length).toBeLessThan(160);
    expect(line).toMatch(/got "x{40}"\.\.\.$/);
  });
});

describe('reading the file', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('loads a file and refuses a missing one as a user error', async () => {
    const directory = tempDirectory('aw-load-');
    const file = path.join(directory, 'config.yaml');
    writeFileSync(file, oneWebhook('id: crm'));
    expect((await loadConfigFile(file)).assetUpdater.webhooks[0]!.id).toBe('crm');
    await expect(loadConfigFile(path.join(directory, 'nope.yaml'))).rejects.toMatchObject({
      name: 'UserError',
      code: 'config_unreadable',
    });
  });

  it('takes --config over ASSET_WEBHOOKS_CONFIG, and the variable when there is no option', () => {
    vi.stubEnv('ASSET_WEBHOOKS_CONFIG', '/from/env.yaml');
    expect(configFromEnvOrOption('/from/option.yaml')).toBe('/from/option.yaml');
    expect(configFromEnvOrOption()).toBe('/from/env.yaml');
  });

  it('names both --config and ASSET_WEBHOOKS_CONFIG when neither is given', () => {
    vi.stubEnv('ASSET_WEBHOOKS_CONFIG', '');
    expect(() => configFromEnvOrOption()).toThrow(UserError);
    expect(() => configFromEnvOrOption(undefined)).toThrow(/--config: .*ASSET_WEBHOOKS_CONFIG/);
  });
});

describe('redactedUrl', () => {
  it.each([
    ['https://user:secret@receiver.example:8443/path?q=1', 'https://receiver.example:8443/path?q=1'],
    ['https://token@receiver.example/', 'https://receiver.example/'],
    ['http://receiver.example/a', 'http://receiver.example/a'],
    ['not a url', '<invalid url>'],
  ])('%s → %s', (url, expected) => {
    expect(redactedUrl(url)).toBe(expected);
  });
});
