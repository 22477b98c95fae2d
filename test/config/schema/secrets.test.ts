import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/** src/config/schema/secrets.ts: `assetUpdater.secrets`, and secret names with provider file. */
const { refuses, reads } = useSchemaTable();
const secrets = (config: Config) => config.assetUpdater.secrets;
const at = 'assetUpdater.secrets';
const FILE = { provider: 'file', directory: '/run/secrets' };

describe('secrets: defaults', () => {
  reads([
    ['the section left out', {}, secrets, { provider: 'env', cacheSeconds: 300 }],
    ['an empty section', { settings: { secrets: {} } }, secrets, { provider: 'env', cacheSeconds: 300 }],
  ]);
});

describe('secrets.provider: env, file, gcp or aws, each with what it needs', () => {
  reads([
    ['env', { settings: { secrets: { provider: 'env' } } }, secrets, { provider: 'env', cacheSeconds: 300 }],
    ['file with a directory', { settings: { secrets: FILE } }, secrets, { ...FILE, cacheSeconds: 300 }],
    [
      'gcp with a project and an endpoint',
      { settings: { secrets: { provider: 'gcp', gcp: { projectId: 'p', apiEndpoint: 'sm.internal' } } } },
      secrets,
      { provider: 'gcp', cacheSeconds: 300, gcp: { projectId: 'p', apiEndpoint: 'sm.internal' } },
    ],
    [
      'aws with a region and an endpoint',
      { settings: { secrets: { provider: 'aws', aws: { region: 'eu-west-1', endpoint: 'http://127.0.0.1:4566' } } } },
      secrets,
      { provider: 'aws', cacheSeconds: 300, aws: { region: 'eu-west-1', endpoint: 'http://127.0.0.1:4566' } },
    ],
  ]);
  refuses([
    [
      'an unknown provider',
      { settings: { secrets: { provider: 'vault' } } },
      `${at}.provider: expected one of env, file, gcp, aws, got "vault"`,
    ],
    [
      'a provider in capitals',
      { settings: { secrets: { provider: 'ENV' } } },
      `${at}.provider: expected one of env, file, gcp, aws, got "ENV"`,
    ],
    [
      'file without a directory',
      { settings: { secrets: { provider: 'file' } } },
      `${at}.directory: expected a directory for secrets provider file, got nothing`,
    ],
    [
      'file with an empty directory',
      { settings: { secrets: { provider: 'file', directory: '' } } },
      `${at}.directory: expected a non-empty string, got ""`,
    ],
    [
      'gcp without its section',
      { settings: { secrets: { provider: 'gcp' } } },
      `${at}.gcp.projectId: expected a projectId for secrets provider gcp, got nothing`,
    ],
    [
      'gcp without a projectId',
      { settings: { secrets: { provider: 'gcp', gcp: {} } } },
      `${at}.gcp.projectId: expected a non-empty string, got nothing`,
    ],
    [
      'gcp with an empty apiEndpoint',
      { settings: { secrets: { provider: 'gcp', gcp: { projectId: 'p', apiEndpoint: '' } } } },
      `${at}.gcp.apiEndpoint: expected a non-empty string, got ""`,
    ],
    [
      'gcp as a string',
      { settings: { secrets: { provider: 'gcp', gcp: 'my-project' } } },
      `${at}.gcp: expected a mapping, got "my-project"`,
    ],
    [
      'aws without its section',
      { settings: { secrets: { provider: 'aws' } } },
      `${at}.aws.region: expected a region for secrets provider aws, got nothing`,
    ],
    [
      'aws with an empty region',
      { settings: { secrets: { provider: 'aws', aws: { region: '' } } } },
      `${at}.aws.region: expected a non-empty string, got ""`,
    ],
    [
      'aws with an endpoint that is not http',
      { settings: { secrets: { provider: 'aws', aws: { region: 'r', endpoint: 'ftp://aws.example' } } } },
      `${at}.aws.endpoint: expected an http or https URL, got "ftp://aws.example"`,
    ],
    [
      'aws with credentials in its endpoint, which the SDK would not use',
      { settings: { secrets: { provider: 'aws', aws: { region: 'r', endpoint: 'http://key:secret@aws.example' } } } },
      `${at}.aws.endpoint: expected a url without user or password, which are not used (the AWS SDK takes its credentials from its default chain: the environment, a profile or a role), got "http://key:***@aws.example"`,
    ],
  ]);
});

describe('secrets.cacheSeconds: an integer 0..86400', () => {
  reads([
    ['0 (no cache)', { settings: { secrets: { cacheSeconds: 0 } } }, (c) => secrets(c).cacheSeconds, 0],
    ['86400', { settings: { secrets: { cacheSeconds: 86_400 } } }, (c) => secrets(c).cacheSeconds, 86_400],
  ]);
  refuses([
    [
      '-1',
      { settings: { secrets: { cacheSeconds: -1 } } },
      `${at}.cacheSeconds: expected an integer from 0 to 86400, got -1`,
    ],
    [
      '86401',
      { settings: { secrets: { cacheSeconds: 86_401 } } },
      `${at}.cacheSeconds: expected an integer from 0 to 86400, got 86401`,
    ],
  ]);
});

describe('secret names with provider file: a file name in the directory', () => {
  reads([
    [
      'a plain file name',
      { settings: { secrets: FILE }, webhook: { apikey: 'crm-api-key' } },
      (c) => c.assetUpdater.webhooks[0]!.apikey,
      'crm-api-key',
    ],
    // With provider env a name is a variable's suffix: slashes are no path there.
    [
      'a name with a slash under provider env',
      { webhook: { apikey: 'team/crm' } },
      (c) => c.assetUpdater.webhooks[0]!.apikey,
      'team/crm',
    ],
  ]);
  const expected = 'expected a file name without path separators, NUL, "." or ".." (secrets provider file)';
  refuses([
    [
      'an apikey that is a path',
      { settings: { secrets: FILE }, webhook: { apikey: '../etc/passwd' } },
      `assetUpdater.webhooks[0].apikey: ${expected}, got "../etc/passwd"`,
    ],
    [
      'an apikey of ".."',
      { settings: { secrets: FILE }, webhook: { apikey: '..' } },
      `assetUpdater.webhooks[0].apikey: ${expected}, got ".."`,
    ],
    [
      'a signing secret in a subdirectory',
      { settings: { secrets: FILE }, webhook: { signing: { secret: 'keys/signing' } } },
      `assetUpdater.webhooks[0].signing.secret: ${expected}, got "keys/signing"`,
    ],
  ]);
});

describe('secrets: its shape and unknown keys', () => {
  refuses([
    [
      'an unknown key (a typo)',
      { settings: { secrets: { cacheSecond: 5 } } },
      `${at}.cacheSecond: expected no such key (check the spelling), got unknown key "cacheSecond"`,
    ],
    [
      'an unknown key of aws',
      { settings: { secrets: { provider: 'aws', aws: { region: 'r', zone: 'a' } } } },
      `${at}.aws.zone: expected no such key (check the spelling), got unknown key "zone"`,
    ],
    [
      'an unknown key of gcp',
      { settings: { secrets: { provider: 'gcp', gcp: { projectId: 'p', project: 'p' } } } },
      `${at}.gcp.project: expected no such key (check the spelling), got unknown key "project"`,
    ],
  ]);
});
