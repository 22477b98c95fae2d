import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { badDocuments, twoWebhooks, valid } from '../config/bad-documents.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

// These run the real command line as a child process (from dist/: `npm test`
// builds first), so they check the exit status and what an operator sees.

const directory = tempDirectory('aw-config-');
let counter = 0;

function file(text: string): string {
  const name = path.join(directory, `config-${counter++}.yaml`);
  writeFileSync(name, text);
  return name;
}

/** One bad document of each class of problem (every one is checked without a process in schema.test.ts). */
const oneOfEachClass = new Set([
  'a missing enabled',
  'a mistyped number',
  'a url that is not http(s)',
  'an unknown condition',
  'an unknown event type',
  'an empty value list',
  'fieldName on a filter that is not additionalFields',
  'a schemaId value that is not digits',
  'a parentId that is neither digits nor null',
  'maxPayloadBytes below 1024',
  'a duplicate id',
  'two default ids that collide',
  'a header that overrides X-API-Key',
  'a header value with CR or LF',
  'provider gcp without a projectId',
  'a misspelt key that would otherwise mean "all types"',
  'a misspelt root key',
  'an empty document',
  'a YAML syntax error, with line and column',
  'a url with user and password',
  'a url with CR and LF',
  'a url longer than the limit',
  'a header longer than the limit',
  'a NUL in a filter value',
  'a NUL in a fieldName',
  'a file of another format (a shadow password file)',
  'a long unknown key with a terminal escape',
]);

describe('check-config refuses each class of bad document with the exact path (real CLI, exit 1)', () => {
  it('covers a listed document for every class named', () => {
    expect([...oneOfEachClass].filter((name) => !badDocuments.some(([what]) => what === name))).toEqual([]);
  });

  it.concurrent.for(badDocuments.filter(([what]) => oneOfEachClass.has(what)))(
    '%s',
    async ([, text, expected], { expect }) => {
      const result = await runCli(['check-config', file(text)]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(expected);
      expect(result.stdout).toBe('');
      expect(result.stderr).not.toMatch(/\n\s+at /);
    },
  );

  it.concurrent('a document past the size limit, refused before it is parsed', async ({ expect }) => {
    // A 50 MB url: parsing it would take seconds and gigabytes.
    const result = await runCli([
      'check-config',
      file(valid('').replace('https://receiver.example/a', `https://receiver.example/${'a'.repeat(50 * 1024 * 1024)}`)),
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toMatch(
      /^\S+config-\d+\.yaml: expected a configuration document of at most 4194304 bytes \(4 MiB\), got 52428\d{3} bytes$/,
    );
  });

  // Within the size limit, each of these took the YAML parser tens of seconds and gigabytes.
  it.concurrent.for([
    [
      '4 MB of nested flow lists',
      `assetUpdater: ${'['.repeat(2_000_000)}${']'.repeat(2_000_000)}\n`,
      /config-\d+\.yaml:1:77: expected collections nested at most 64 deep, got deeper$/,
    ],
    [
      '4 MB of nested block lists',
      `assetUpdater:\n${'- '.repeat(2_000_000)}x\n`,
      /config-\d+\.yaml:2:127: expected collections nested at most 64 deep, got deeper$/,
    ],
    [
      '4 MB of tiny values',
      `assetUpdater: [${'1,'.repeat(2_000_000)}1]\n`,
      /config-\d+\.yaml:1:200013: expected a document of at most 200000 values, keys, indicators and separators, got more$/,
    ],
    [
      '4 MB of empty entries, each a parse error',
      `assetUpdater: [${','.repeat(4_000_000)}]\n`,
      /config-\d+\.yaml:1:200013: expected a document of at most 200000 values, keys, indicators and separators, got more$/,
    ],
    [
      'an !!omap of 45000 entries',
      `assetUpdater: !!omap\n${Array.from({ length: 45_000 }, (_, index) => `- k${index}: 1`).join('\n')}\n`,
      /^assetUpdater: expected a mapping, got a list \[\{"k0":1\},/,
    ],
    [
      '4 MB of blank lines',
      `${'\n'.repeat(4_000_000)}assetUpdater: { webhooks: [] }\n`,
      /config-\d+\.yaml:200001:1: expected a document of at most 200000 lines, got more$/,
    ],
  ] as const)('%s, refused within seconds naming the limit', async ([, text, expected], { expect }) => {
    const result = await runCli(['check-config', file(text)], { env: {}, timeoutMs: 15_000 });
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toMatch(expected);
  });

  it.concurrent('a mapping of 49000 keys, checked without comparing every key with every other', async ({ expect }) => {
    const keys = Array.from({ length: 49_000 }, (_, index) => `X-K${index}: v`).join(', ');
    const result = await runCli(['check-config', file(valid(`headers: { ${keys} }`))], { env: {}, timeoutMs: 20_000 });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('expected at most 16384 bytes of headers in all');
  });

  it.concurrent('a file that does not exist', async ({ expect }) => {
    const result = await runCli(['check-config', path.join(directory, 'missing.yaml')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/missing\.yaml: expected a readable configuration file, got .*ENOENT/);
  });

  it.concurrent('reports every problem at once, one line each, in document order', async ({ expect }) => {
    const result = await runCli([
      'check-config',
      file(
        'assetUpdater:\n  intervalSeconds: 0\n  webhooks:\n' +
          '    - { id: a, url: "x", enabled: 1 }\n' +
          '    - { id: a, url: "https://b.example/", enabled: true }\n' +
          '    - { url: "https://c.example/", enabled: true, filters: [ { filterKind: keywords, condition: OR, value: [] } ] }\n' +
          '  secrets: { provider: file }\n',
      ),
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([
      'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 0',
      'assetUpdater.webhooks[0].url: expected an http or https URL, got "x"',
      'assetUpdater.webhooks[0].enabled: expected true or false, got 1',
      'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same), got "a"',
      'assetUpdater.webhooks[2].filters[0].condition: expected one of AND, ANY, NONE, got "OR"',
      'assetUpdater.webhooks[2].filters[0].value: expected at least one value, got an empty list',
      'assetUpdater.secrets.directory: expected a directory for secrets provider file, got nothing',
    ]);
  });
});

describe('check-config on a valid document', () => {
  it.concurrent('says so in one line and exits 0 (YAML)', async ({ expect }) => {
    const result = await runCli([
      'check-config',
      file(
        twoWebhooks(
          '{ id: crm, url: "https://a.example/", enabled: true }',
          '{ url: "https://b.example/", enabled: false }',
        ),
      ),
    ]);
    expect(result.code).toBe(0);
    // The webhook without id is warned about (see the tests of warnings), which does not make the document invalid.
    expect(result.stderr).toMatch(
      /^assetUpdater\.webhooks\[1\]\.id: warning: not set, so the id webhook-[0-9a-f]{12} is derived from the url; [^\n]*\n$/,
    );
    expect(result.stdout.trim().split('\n')).toHaveLength(1);
    expect(result.stdout).toMatch(/: valid, 2 webhook\(s\) \(1 enabled\): crm, webhook-[0-9a-f]{12}; interval 60s\n$/);
  });

  it.concurrent('takes --database-url as every command does, and needs no database', async ({ expect }) => {
    const result = await runCli([
      'check-config',
      file(valid('id: crm')),
      '--database-url',
      'postgres://nobody@127.0.0.1:1/none',
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/valid, 1 webhook\(s\) \(1 enabled\): crm/);
  });

  it.concurrent('accepts JSON too', async ({ expect }) => {
    const result = await runCli([
      'check-config',
      file(JSON.stringify({ assetUpdater: { webhooks: [{ id: 'crm', url: 'https://a.example/', enabled: true }] } })),
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/valid, 1 webhook\(s\) \(1 enabled\): crm/);
  });

  it.concurrent('takes the file from --config, or else from ASSET_WEBHOOKS_CONFIG', async ({ expect }) => {
    const good = file(valid('id: from-option'));
    const other = file(valid('id: from-env'));
    const byOption = await runCli(['check-config', '--config', good], { env: { ASSET_WEBHOOKS_CONFIG: other } });
    expect(byOption.code).toBe(0);
    expect(byOption.stdout).toContain('from-option');
    const byEnv = await runCli(['check-config'], { env: { ASSET_WEBHOOKS_CONFIG: other } });
    expect(byEnv.code).toBe(0);
    expect(byEnv.stdout).toContain('from-env');
  });

  it.concurrent(
    'refuses a file argument and a different --config together (exit 2) rather than pick one',
    async ({ expect }) => {
      const first = file(valid('id: first'));
      const second = file(valid('id: second'));
      const result = await runCli(['check-config', first, '--config', second]);
      expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: '' });
      expect(result.stderr).toBe(
        `error: --config: expected the same file as the argument ${JSON.stringify(first)}, or only one of them, got ${JSON.stringify(second)} (run with --help for usage)\n`,
      );
      expect((await runCli(['check-config', first, '--config', first])).code).toBe(0);
    },
  );

  it.concurrent('without a file, --config or ASSET_WEBHOOKS_CONFIG: exit 1 naming both', async ({ expect }) => {
    const result = await runCli(['check-config'], { env: { ASSET_WEBHOOKS_CONFIG: undefined } });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      '--config: expected a configuration file (or the environment variable ASSET_WEBHOOKS_CONFIG), got nothing',
    );
  });
});

describe('check-config warns, and still exits 0, when every delivery to a webhook would be refused', () => {
  const document = (url: string, allowPrivate: boolean) => `assetUpdater:
  network: { allowPrivateAddresses: ${allowPrivate} }
  webhooks:
    - { id: public, url: "https://receiver.example.com/hook", enabled: true }
    - { id: here, url: "${url}", enabled: true }
`;

  it.concurrent.for([
    [
      'http://127.0.0.1:8080/hook',
      '127.0.0.1 is a loopback address; every delivery to it is refused unless network.allowPrivateAddresses is true',
    ],
    [
      'http://localhost/hook',
      'localhost is a loopback address; every delivery to it is refused unless network.allowPrivateAddresses is true',
    ],
    [
      'http://[::1]:9000/',
      '::1 is a loopback address; every delivery to it is refused unless network.allowPrivateAddresses is true',
    ],
    [
      'http://10.1.2.3/hook',
      '10.1.2.3 is a private address; every delivery to it is refused unless network.allowPrivateAddresses is true',
    ],
  ] as const)('%s without allowPrivateAddresses', async ([url, warning], { expect }) => {
    const result = await runCli(['check-config', file(document(url, false))]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/: valid, 2 webhook\(s\)/);
    expect(result.stderr).toBe(`assetUpdater.webhooks[1].url: warning: ${warning}\n`);
    const allowed = await runCli(['check-config', file(document(url, true))]);
    expect(allowed.code).toBe(0);
    expect(allowed.stderr).toBe('');
  });

  it('the cloud metadata address, whatever allowPrivateAddresses says', async () => {
    const result = await runCli(['check-config', file(document('http://169.254.169.254/latest', true))]);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe(
      'assetUpdater.webhooks[1].url: warning: 169.254.169.254 is a cloud metadata address; every delivery to it is refused whatever network.allowPrivateAddresses says\n',
    );
  });
});

describe('check-config and paused', () => {
  it('counts paused webhooks, and warns that enabled: false wins over paused (exit 0)', async () => {
    const result = await runCli([
      'check-config',
      file(`assetUpdater:
  webhooks:
    - { id: window, url: "https://a.example.com/hook", enabled: true, paused: true }
    - { id: off, url: "https://b.example.com/hook", enabled: false, paused: true }
`),
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/: valid, 2 webhook\(s\) \(1 enabled, 1 of them paused\): window, off;/);
    expect(result.stderr).toBe(
      'assetUpdater.webhooks[1].paused: warning: enabled is false, which wins: events of this time are not delivered ' +
        'later and waiting payloads expire; for a pause that keeps them, set enabled: true\n',
    );
  });

  it('warns that retry.disableOnGone wins over 410 in retryStatusCodes (exit 0)', async () => {
    const result = await runCli([
      'check-config',
      file(`assetUpdater:
  retry: { retryStatusCodes: [429, 410], disableOnGone: true }
  webhooks:
    - { id: crm, url: "https://a.example.com/hook", enabled: true }
`),
    ]);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe(
      'assetUpdater.retry.retryStatusCodes[1]: warning: 410 is not retried, since retry.disableOnGone is true, which wins: ' +
        'a 410 suspends its webhook until `asset-webhooks resume --webhook ID` or a new url\n',
    );
  });

  it('refuses a paused that is not a boolean, naming the path', async () => {
    const result = await runCli(['check-config', file(valid('paused: "yes"'))]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('assetUpdater.webhooks[0].paused: expected true or false, got "yes"');
  });
});
