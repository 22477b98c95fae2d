import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { runCli } from '../helpers/cli.js';

const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-config-'));
let counter = 0;

function file(text: string): string {
  const name = path.join(directory, `config-${counter++}.yaml`);
  writeFileSync(name, text);
  return name;
}

const valid = (webhookFields: string, top = ''): string =>
  `assetUpdater:\n${top}  webhooks:\n    - { url: "https://receiver.example/a", enabled: true${webhookFields ? `, ${webhookFields}` : ''} }\n`;

describe('check-config refuses each kind of bad document with the exact path (real CLI, exit 1)', () => {
  it.each([
    ['a missing required key', 'assetUpdater:\n  webhooks:\n    - { url: "https://receiver.example/a" }\n', 'assetUpdater.webhooks[0].enabled: expected true or false, got nothing'],
    ['a mistyped key', valid('batchSize: "ten"'), 'assetUpdater.webhooks[0].batchSize: expected an integer from 1 to 100, got "ten"'],
    ['a url that is not http(s)', 'assetUpdater:\n  webhooks:\n    - { url: "ftp://x.example/", enabled: true }\n', 'assetUpdater.webhooks[0].url: expected an http or https URL, got "ftp://x.example/"'],
    ['an unknown filterKind', valid('filters: [ { filterKind: colour, condition: ANY, value: [red] } ]'), 'assetUpdater.webhooks[0].filters[0].filterKind: expected one of keywords, additionalFields, state, schemaId, typeId, domainId, parentId, got "colour"'],
    ['an unknown condition', valid('filters: [ { filterKind: keywords, condition: OR, value: [a] } ]'), 'assetUpdater.webhooks[0].filters[0].condition: expected one of AND, ANY, NONE, got "OR"'],
    ['an unknown event type', valid('eventTypes: [Created, Renamed]'), 'assetUpdater.webhooks[0].eventTypes[1]: expected one of Created, Edited, Deleted, Purged, Reversion (any case), got "Renamed"'],
    ['an unknown secrets provider', valid('', '  secrets: { provider: vault }\n'), 'assetUpdater.secrets.provider: expected one of env, file, gcp, aws, got "vault"'],
    ['an empty value list', valid('filters: [ { filterKind: keywords, condition: ANY, value: [] } ]'), 'assetUpdater.webhooks[0].filters[0].value: expected at least one value, got an empty list'],
    ['fieldName on a filter that is not additionalFields', valid('filters: [ { filterKind: keywords, fieldName: x, condition: ANY, value: [a] } ]'), 'assetUpdater.webhooks[0].filters[0].fieldName: expected no fieldName on a keywords filter (only additionalFields takes one), got "x"'],
    ['a value that must be digits', valid('filters: [ { filterKind: schemaId, condition: ANY, value: ["12", "abc"] } ]'), 'assetUpdater.webhooks[0].filters[0].value[1]: expected a string of digits, got "abc"'],
    ['a parentId that is neither digits nor null', valid('filters: [ { filterKind: parentId, condition: ANY, value: [none] } ]'), 'assetUpdater.webhooks[0].filters[0].value[0]: expected a string of digits or "null", got "none"'],
    ['an out-of-range number', valid('', '  intervalSeconds: 0\n'), 'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 0'],
    ['a duplicate id', 'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://a.example/", enabled: true }\n    - { id: crm, url: "https://b.example/", enabled: true }\n', 'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same), got "crm"'],
    ['two default ids that collide', 'assetUpdater:\n  webhooks:\n    - { url: "https://a.example/", enabled: true }\n    - { url: "https://a.example/", enabled: false }\n', 'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same), got "webhook-'],
    ['a header that overrides Content-Type', valid('headers: { content-type: text/plain }'), 'assetUpdater.webhooks[0].headers["content-type"]: expected a header other than Content-Type, X-API-Key, Host or Content-Length (the service sets those), got "content-type"'],
    ['a header that overrides X-API-Key', valid('headers: { X-API-Key: k }'), 'assetUpdater.webhooks[0].headers["X-API-Key"]: expected a header other than'],
    ['a header value with CR or LF', valid('headers: { X-Tenant: "a\\r\\nInjected: 1" }'), 'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a header value without CR, LF or NUL, got "a\\r\\nInjected: 1"'],
    ['a missing setting of the chosen secrets provider', valid('', '  secrets: { provider: file }\n'), 'assetUpdater.secrets.directory: expected a directory for secrets provider file, got nothing'],
    ['a misspelt key that would otherwise mean "all types"', valid('eventType: [Created]'), 'assetUpdater.webhooks[0].eventType: expected no such key (check the spelling), got unknown key "eventType"'],
    ['a misspelt root key', 'assetUpdatr:\n  webhooks: []\n', 'assetUpdatr: expected the root key "assetUpdater", got unknown key "assetUpdatr"'],
    ['an empty document', '', 'expected a document with the root key "assetUpdater", got an empty document'],
    ['a YAML syntax error, with line and column', 'assetUpdater:\n  webhooks: [\n', ':3:1: expected valid YAML or JSON, got'],
  ])('%s', async (_name, text, expected) => {
    const result = await runCli(['check-config', file(text)]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(expected);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('a file that does not exist', async () => {
    const result = await runCli(['check-config', path.join(directory, 'missing.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/missing\.yaml: expected a readable configuration file, got .*ENOENT/);
  });

  it('reports every problem at once, one line each', async () => {
    const result = await runCli(['check-config', file('assetUpdater:\n  intervalSeconds: 0\n  webhooks:\n    - { url: "x", enabled: 1 }\n')]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([
      'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 0',
      'assetUpdater.webhooks[0].url: expected an http or https URL, got "x"',
      'assetUpdater.webhooks[0].enabled: expected true or false, got 1',
    ]);
  });

  it('accepts a valid document (JSON too) and says so, exit 0', async () => {
    const result = await runCli(['check-config', file(JSON.stringify({ assetUpdater: { webhooks: [{ id: 'crm', url: 'https://a.example/', enabled: true }] } }))]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/valid, 1 webhook\(s\) \(1 enabled\): crm/);
  });
});

describe('defaults (CONTRACT section 3)', () => {
  it('fills every extension default and the spec defaults', () => {
    const config = parseConfigText(valid(''), 'test').assetUpdater;
    expect(config).toMatchObject({
      intervalSeconds: 60, maxPayloadBytes: 16_777_216, requestTimeoutSeconds: 30, retentionDays: 14,
      retry: { delaysSeconds: [60, 120, 240, 480, 480], deadLetterAfterSeconds: 86_400 },
      network: { allowPrivateAddresses: false }, secrets: { provider: 'env', cacheSeconds: 300 },
    });
    expect(config.webhooks[0]).toMatchObject({ resourceTypes: ['Resource'], batchSize: 100, concurrency: 1, filters: [] });
    expect(config.webhooks[0]!.eventTypes).toBeUndefined();
  });

  it('derives the default id from the SHA-256 of the url', () => {
    // sha256("https://receiver.example/a") begins 50155c38a274.
    expect(parseConfigText(valid(''), 'test').assetUpdater.webhooks[0]!.id).toBe('webhook-50155c38a274');
  });
});
