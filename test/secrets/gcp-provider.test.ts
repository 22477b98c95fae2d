import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { gcpResourceName } from '../../src/secrets/gcp-provider.js';
import { createSecretResolver } from '../../src/secrets/resolver.js';
import { SecretResolutionError, type SecretsConfig } from '../../src/secrets/types.js';
import { json, startLocalApi, type LocalApi } from '../helpers/http-servers.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

/**
 * The real @google-cloud/secret-manager client over its REST transport
 * (fallback: true) against a local server speaking Secret Manager's REST
 * protocol: GET /v1/{name}:access answering {name, payload: {data: base64}}.
 * apiEndpoint http://127.0.0.1:PORT becomes the client options apiEndpoint,
 * port and protocol 'http'.
 *
 * Authentication goes through Application Default Credentials as in
 * production: GOOGLE_APPLICATION_CREDENTIALS names a workload-identity
 * (external_account) file whose token_url is the same local server, so the
 * token exchange happens locally. GCE_METADATA_HOST points at the local
 * server too: a metadata lookup would be recorded, and the tests check there
 * is none.
 */
let api: LocalApi;
let config: SecretsConfig;
const versions = new Map<string, string>();

beforeAll(async () => {
  api = await startLocalApi();
  config = { provider: 'gcp', cacheSeconds: 300, gcp: { projectId: 'my-project', apiEndpoint: api.origin } };
  const directory = tempDirectory('aw-gcp-');
  writeFileSync(path.join(directory, 'subject-token'), 'a-subject-token');
  writeFileSync(
    path.join(directory, 'credentials.json'),
    JSON.stringify({
      type: 'external_account',
      audience: '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/local',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: `${api.origin}/v1/token`,
      credential_source: { file: path.join(directory, 'subject-token') },
    }),
  );
  vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', path.join(directory, 'credentials.json'));
  vi.stubEnv('GCE_METADATA_HOST', api.origin.replace('http://', ''));
  api.answer = (request, response) => {
    if (request.method === 'POST' && request.url === '/v1/token') {
      json(response, 200, {
        access_token: 'local-access-token',
        issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        token_type: 'Bearer',
        expires_in: 3600,
      });
      return;
    }
    const match = /^\/v1\/(projects\/[^/]+\/secrets\/[^/]+\/versions\/[^/:?]+):access(\?|$)/.exec(request.url);
    const name = match?.[1];
    const value = name === undefined ? undefined : versions.get(name);
    if (request.method !== 'GET' || name === undefined || value === undefined) {
      json(response, 404, {
        error: {
          code: 404,
          message: `Secret Version [${name ?? request.url}] not found or has no versions.`,
          status: 'NOT_FOUND',
        },
      });
      return;
    }
    if (request.headers.authorization !== 'Bearer local-access-token') {
      json(response, 401, {
        error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' },
      });
      return;
    }
    json(response, 200, { name, payload: { data: Buffer.from(value, 'utf8').toString('base64') } });
  };
});
beforeEach(() => {
  api.requests.length = 0;
  versions.clear();
});
afterAll(async () => {
  vi.unstubAllEnvs();
  await api.close();
});

const accessRequests = () => api.requests.filter((request) => request.url.includes(':access'));

describe('gcp provider through the SDK against a local Secret Manager', () => {
  it('resolves the latest version of a secret id in the configured project, authorised by the exchanged token', async () => {
    versions.set('projects/my-project/secrets/crm-key/versions/latest', 'gcp-secret-1');
    expect(await createSecretResolver(config).resolve('crm-key')).toBe('gcp-secret-1');
    const [access] = accessRequests();
    expect(access).toMatchObject({ method: 'GET' });
    expect(access!.url.split('?')[0]).toBe('/v1/projects/my-project/secrets/crm-key/versions/latest:access');
    expect(access!.headers.authorization).toBe('Bearer local-access-token');
  });

  it('touches nothing but the token exchange and the access call (no metadata server)', async () => {
    versions.set('projects/my-project/secrets/crm-key/versions/latest', 'v');
    await createSecretResolver(config).resolve('crm-key');
    const paths = api.requests.map((request) => `${request.method} ${request.url.split('?')[0]}`);
    expect(paths).toEqual(['POST /v1/token', 'GET /v1/projects/my-project/secrets/crm-key/versions/latest:access']);
  });

  it.each([
    ['projects/other/secrets/shared', 'projects/other/secrets/shared/versions/latest'],
    ['projects/other/secrets/shared/versions/7', 'projects/other/secrets/shared/versions/7'],
  ])('takes a full resource name %s as %s', async (name, resource) => {
    versions.set(resource, `value of ${resource}`);
    expect(await createSecretResolver(config).resolve(name)).toBe(`value of ${resource}`);
  });

  it('decodes the payload bytes as UTF-8', async () => {
    versions.set('projects/my-project/secrets/unicode/versions/latest', 'schlüssel-€');
    expect(await createSecretResolver(config).resolve('unicode')).toBe('schlüssel-€');
  });

  it('caches the value, and reads the rotated one after invalidate()', async () => {
    versions.set('projects/my-project/secrets/crm-key/versions/latest', 'before-rotation');
    const resolver = createSecretResolver(config);
    expect(await resolver.resolve('crm-key')).toBe('before-rotation');
    versions.set('projects/my-project/secrets/crm-key/versions/latest', 'after-rotation');
    expect(await resolver.resolve('crm-key')).toBe('before-rotation');
    resolver.invalidate('crm-key');
    expect(await resolver.resolve('crm-key')).toBe('after-rotation');
    expect(accessRequests()).toHaveLength(2);
  });

  it('a missing secret fails naming the resource, without a value', async () => {
    versions.set('projects/my-project/secrets/crm-key/versions/latest', 'gcp-secret-present');
    const error = await createSecretResolver(config)
      .resolve('missing')
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SecretResolutionError);
    expect(error).toMatchObject({ secretName: 'missing', provider: 'gcp' });
    expect(String(error)).toMatch(
      /^SecretResolutionError: secret "missing" \(provider gcp\): could not access projects\/my-project\/secrets\/missing\/versions\/latest: .*not found/,
    );
    expect(String(error)).not.toContain('gcp-secret-present');
  });
});

describe('gcp resource names', () => {
  it.each([
    ['crm-key', 'projects/my-project/secrets/crm-key/versions/latest'],
    ['projects/p/secrets/s', 'projects/p/secrets/s/versions/latest'],
    ['projects/p/secrets/s/versions/3', 'projects/p/secrets/s/versions/3'],
    ['projects/p/secrets/s/versions/latest', 'projects/p/secrets/s/versions/latest'],
  ])('%s → %s', (name, resource) => {
    expect(gcpResourceName(name, 'my-project')).toBe(resource);
  });
});
