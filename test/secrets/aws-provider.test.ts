import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSecretResolver } from '../../src/secrets/resolver.js';
import { SecretResolutionError, type SecretsConfig } from '../../src/secrets/types.js';
import { json, startLocalApi, type LocalApi } from '../helpers/http-servers.js';

/**
 * The real @aws-sdk/client-secrets-manager against a local server speaking
 * the Secrets Manager JSON protocol (POST /, X-Amz-Target
 * secretsmanager.GetSecretValue, application/x-amz-json-1.1), reached through
 * the endpoint option and signed with static credentials from the environment
 * (the first link of the SDK's default credential chain).
 */
let api: LocalApi;
let config: SecretsConfig;
const secrets = new Map<string, { SecretString?: string; SecretBinary?: string }>();

beforeAll(async () => {
  api = await startLocalApi();
  config = { provider: 'aws', cacheSeconds: 300, aws: { region: 'eu-west-1', endpoint: api.origin } };
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIALOCALTEST');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local-secret-access-key');
  vi.stubEnv('AWS_SESSION_TOKEN', '');
  vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');
  api.answer = (request, response) => {
    const contentType = 'application/x-amz-json-1.1';
    if (request.headers['x-amz-target'] !== 'secretsmanager.GetSecretValue') {
      json(response, 400, { __type: 'UnknownOperationException', message: 'unexpected target' }, contentType);
      return;
    }
    const { SecretId } = JSON.parse(request.body) as { SecretId: string };
    const secret = secrets.get(SecretId);
    if (SecretId === 'denied') {
      json(
        response,
        400,
        { __type: 'AccessDeniedException', message: 'User is not authorized to perform secretsmanager:GetSecretValue' },
        contentType,
      );
    } else if (secret === undefined) {
      json(
        response,
        400,
        { __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." },
        contentType,
      );
    } else {
      json(
        response,
        200,
        {
          ARN: `arn:aws:secretsmanager:eu-west-1:123456789012:secret:${SecretId}-AbCdEf`,
          Name: SecretId,
          VersionId: 'v',
          ...secret,
        },
        contentType,
      );
    }
  };
});
beforeEach(() => {
  api.requests.length = 0;
  secrets.clear();
});
afterAll(async () => {
  vi.unstubAllEnvs();
  await api.close();
});

describe('aws provider through the SDK against a local Secrets Manager', () => {
  it('resolves the SecretString of GetSecretValue for the SecretId NAME, in a signed request', async () => {
    secrets.set('crm-api-key', { SecretString: 'aws-secret-1' });
    const resolver = createSecretResolver(config);
    expect(await resolver.resolve('crm-api-key')).toBe('aws-secret-1');
    expect(api.requests).toHaveLength(1);
    const [request] = api.requests;
    expect(request).toMatchObject({ method: 'POST', url: '/', body: '{"SecretId":"crm-api-key"}' });
    expect(request!.headers['x-amz-target']).toBe('secretsmanager.GetSecretValue');
    expect(request!.headers['content-type']).toBe('application/x-amz-json-1.1');
    expect(request!.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIALOCALTEST\/\d{8}\/eu-west-1\/secretsmanager\/aws4_request/,
    );
  });

  it('accepts an ARN as the SecretId', async () => {
    const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:crm-AbCdEf';
    secrets.set(arn, { SecretString: 'by-arn' });
    expect(await createSecretResolver(config).resolve(arn)).toBe('by-arn');
  });

  it('caches the value, and reads the rotated one after invalidate()', async () => {
    secrets.set('crm-api-key', { SecretString: 'before-rotation' });
    const resolver = createSecretResolver(config);
    expect(await resolver.resolve('crm-api-key')).toBe('before-rotation');
    secrets.set('crm-api-key', { SecretString: 'after-rotation' });
    expect(await resolver.resolve('crm-api-key')).toBe('before-rotation');
    expect(api.requests).toHaveLength(1);
    resolver.invalidate('crm-api-key');
    expect(await resolver.resolve('crm-api-key')).toBe('after-rotation');
    expect(api.requests).toHaveLength(2);
  });

  it('concurrent resolutions of one name make one request', async () => {
    secrets.set('crm-api-key', { SecretString: 'shared' });
    const resolver = createSecretResolver(config);
    expect(
      await Promise.all([
        resolver.resolve('crm-api-key'),
        resolver.resolve('crm-api-key'),
        resolver.resolve('crm-api-key'),
      ]),
    ).toEqual(['shared', 'shared', 'shared']);
    expect(api.requests).toHaveLength(1);
  });

  it('an unknown secret fails with the service message and no value', async () => {
    const error = await createSecretResolver(config)
      .resolve('missing')
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SecretResolutionError);
    expect(error).toMatchObject({
      secretName: 'missing',
      provider: 'aws',
      message:
        'secret "missing" (provider aws): GetSecretValue failed: Secrets Manager can\'t find the specified secret.',
    });
  });

  it('access denied fails with the service message', async () => {
    await expect(createSecretResolver(config).resolve('denied')).rejects.toThrow(
      /GetSecretValue failed: User is not authorized/,
    );
  });

  it('a binary-only secret is refused: the key is the SecretString', async () => {
    secrets.set('binary', { SecretBinary: Buffer.from('bytes').toString('base64') });
    await expect(createSecretResolver(config).resolve('binary')).rejects.toThrow(
      'secret "binary" (provider aws): expected a SecretString, got a binary secret or none',
    );
  });
});
