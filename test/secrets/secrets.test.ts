import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging/logger.js';
import { envVariableName } from '../../src/secrets/env-provider.js';
import { gcpResourceName } from '../../src/secrets/gcp-provider.js';
import { createSecretResolver } from '../../src/secrets/resolver.js';

async function body(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return typeof address === 'object' && address ? address.port : 0;
}

describe('env provider', () => {
  it('reads ASSET_WEBHOOKS_SECRET_ + the name upper-cased, other characters as _', async () => {
    expect(envVariableName('crm-api-key')).toBe('ASSET_WEBHOOKS_SECRET_CRM_API_KEY');
    expect(envVariableName('shop.key/2')).toBe('ASSET_WEBHOOKS_SECRET_SHOP_KEY_2');
    const resolver = createSecretResolver({ provider: 'env', cacheSeconds: 300 }, { env: { ASSET_WEBHOOKS_SECRET_CRM_API_KEY: 'v1' } });
    expect(await resolver.resolve('crm-api-key')).toBe('v1');
  });

  it('fails with a message naming the variable, never a value', async () => {
    const resolver = createSecretResolver({ provider: 'env', cacheSeconds: 300 }, { env: {} });
    await expect(resolver.resolve('crm-api-key')).rejects.toThrow('secret "crm-api-key" (provider env): expected the environment variable ASSET_WEBHOOKS_SECRET_CRM_API_KEY to be set, got nothing');
  });
});

describe('file provider', () => {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-secrets-'));
  writeFileSync(path.join(directory, 'crm-api-key'), 'file-secret\n');

  it('reads <directory>/<NAME> with one trailing newline removed', async () => {
    const resolver = createSecretResolver({ provider: 'file', cacheSeconds: 300, directory });
    expect(await resolver.resolve('crm-api-key')).toBe('file-secret');
  });

  it('refuses names that would leave the directory', async () => {
    const resolver = createSecretResolver({ provider: 'file', cacheSeconds: 300, directory });
    await expect(resolver.resolve('../etc/passwd')).rejects.toThrow(/expected a file name without path separators/);
  });
});

describe('caching and rotation', () => {
  it('caches for cacheSeconds, and invalidate() makes the next resolve read the rotated value', async () => {
    const env: NodeJS.ProcessEnv = { ASSET_WEBHOOKS_SECRET_K: 'old' };
    let now = 0;
    const resolver = createSecretResolver({ provider: 'env', cacheSeconds: 300 }, { env, now: () => now });
    expect(await resolver.resolve('k')).toBe('old');
    env.ASSET_WEBHOOKS_SECRET_K = 'new';
    expect(await resolver.resolve('k')).toBe('old');
    resolver.invalidate('k');
    expect(await resolver.resolve('k')).toBe('new');
    env.ASSET_WEBHOOKS_SECRET_K = 'newer';
    now = 301_000;
    expect(await resolver.resolve('k')).toBe('newer');
  });
});

describe('aws provider through @aws-sdk/client-secrets-manager against a local server speaking its JSON protocol', () => {
  let server: Server;
  let port = 0;
  let value = 'aws-secret-1';
  const seen: Array<{ target: string | undefined; body: string; authorization: string | undefined }> = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      void body(request).then((text) => {
        seen.push({ target: request.headers['x-amz-target'] as string | undefined, body: text, authorization: request.headers.authorization });
        const { SecretId } = JSON.parse(text) as { SecretId: string };
        if (SecretId !== 'crm-api-key') {
          response.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' })
            .end(JSON.stringify({ __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." }));
          return;
        }
        response.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' })
          .end(JSON.stringify({ ARN: 'arn:aws:secretsmanager:eu-west-1:1:secret:crm-api-key', Name: SecretId, SecretString: value, VersionId: 'v1' }));
      });
    });
    port = await listen(server);
    process.env.AWS_ACCESS_KEY_ID = 'AKIATEST';
    process.env.AWS_SECRET_ACCESS_KEY = 'test-secret-access-key';
  });
  afterAll(() => server.close());

  it('resolves the SecretString of GetSecretValue, signed, and reads a rotated value after invalidate()', async () => {
    const resolver = createSecretResolver({ provider: 'aws', cacheSeconds: 300, aws: { region: 'eu-west-1', endpoint: `http://127.0.0.1:${port}` } });
    expect(await resolver.resolve('crm-api-key')).toBe('aws-secret-1');
    expect(seen[0]).toMatchObject({ target: 'secretsmanager.GetSecretValue', body: '{"SecretId":"crm-api-key"}' });
    expect(seen[0]!.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIATEST\//);
    value = 'aws-secret-2';
    expect(await resolver.resolve('crm-api-key')).toBe('aws-secret-1');
    resolver.invalidate('crm-api-key');
    expect(await resolver.resolve('crm-api-key')).toBe('aws-secret-2');
  });

  it('reports an unknown secret without any secret value', async () => {
    const resolver = createSecretResolver({ provider: 'aws', cacheSeconds: 300, aws: { region: 'eu-west-1', endpoint: `http://127.0.0.1:${port}` } });
    const error = await resolver.resolve('missing').catch((e: unknown) => e as Error);
    expect(String(error)).toMatch(/secret "missing" \(provider aws\): GetSecretValue failed: Secrets Manager can't find the specified secret/);
    expect(String(error)).not.toContain('aws-secret');
  });
});

describe('gcp provider through @google-cloud/secret-manager (REST) against a local server speaking its protocol', () => {
  let server: Server;
  let port = 0;
  let value = 'gcp-secret-1';
  const requests: Array<{ method: string; url: string; authorization: string | undefined }> = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      void body(request).then(() => {
        requests.push({ method: request.method ?? '', url: request.url ?? '', authorization: request.headers.authorization });
        if (request.url === '/v1/token') {
          // The STS token exchange of workload identity federation.
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
            access_token: 'local-access-token', issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', token_type: 'Bearer', expires_in: 3600,
          }));
          return;
        }
        const match = /^\/v1\/(projects\/[^/]+\/secrets\/([^/]+)\/versions\/[^/:]+):access/.exec(request.url ?? '');
        if (!match || match[2] !== 'crm-key') {
          response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 404, message: 'Secret not found', status: 'NOT_FOUND' } }));
          return;
        }
        response.writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ name: match[1], payload: { data: Buffer.from(value).toString('base64') } }));
      });
    });
    port = await listen(server);
    const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-gcp-'));
    writeFileSync(path.join(directory, 'subject-token'), 'a-subject-token');
    writeFileSync(path.join(directory, 'credentials.json'), JSON.stringify({
      type: 'external_account',
      audience: '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/local',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: `http://127.0.0.1:${port}/v1/token`,
      credential_source: { file: path.join(directory, 'subject-token') },
    }));
    process.env.GOOGLE_APPLICATION_CREDENTIALS = path.join(directory, 'credentials.json');
  });
  afterAll(() => {
    delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
    server.close();
  });

  it('resolves the latest version of a secret id, authorised, and a rotated value after invalidate()', async () => {
    const resolver = createSecretResolver({ provider: 'gcp', cacheSeconds: 300, gcp: { projectId: 'my-project', apiEndpoint: `http://127.0.0.1:${port}` } });
    expect(await resolver.resolve('crm-key')).toBe('gcp-secret-1');
    const access = requests.find((r) => r.url.includes(':access'));
    expect(access).toMatchObject({ method: 'GET', authorization: 'Bearer local-access-token' });
    expect(access!.url.split('?')[0]).toBe('/v1/projects/my-project/secrets/crm-key/versions/latest:access');
    value = 'gcp-secret-2';
    resolver.invalidate('crm-key');
    expect(await resolver.resolve('crm-key')).toBe('gcp-secret-2');
  });

  it('reports a missing secret without any secret value', async () => {
    const resolver = createSecretResolver({ provider: 'gcp', cacheSeconds: 300, gcp: { projectId: 'my-project', apiEndpoint: `http://127.0.0.1:${port}` } });
    const error = await resolver.resolve('missing').catch((e: unknown) => e as Error);
    expect(String(error)).toMatch(/secret "missing" \(provider gcp\): could not access projects\/my-project\/secrets\/missing\/versions\/latest/);
    expect(String(error)).not.toContain('gcp-secret');
  });
});

describe('gcp resource names', () => {
  it('builds the resource name from a secret id or takes a full one', () => {
    expect(gcpResourceName('crm-key', 'my-project')).toBe('projects/my-project/secrets/crm-key/versions/latest');
    expect(gcpResourceName('projects/p/secrets/s', 'x')).toBe('projects/p/secrets/s/versions/latest');
    expect(gcpResourceName('projects/p/secrets/s/versions/3', 'x')).toBe('projects/p/secrets/s/versions/3');
  });
});

describe('secrets never reach the logs', () => {
  it('the service logger redacts header values even if one is passed by mistake', () => {
    let output = '';
    const sink = new Writable({ write(chunk: Buffer, _encoding, done) { output += chunk.toString(); done(); } });
    const logger = createLogger({ level: 'info', destination: sink });
    logger.info({ headers: { 'X-API-Key': 'leaky-secret' }, request: { headers: { 'x-api-key': 'leaky-secret' } } }, 'delivery');
    expect(output).toContain('delivery');
    expect(output).not.toContain('leaky-secret');
  });
});
