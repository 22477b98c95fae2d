import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logging/logger.js';
import { signedHeaders, signingKeys, SigningKeyError } from '../../src/delivery/http/signing.js';
import { createSecretResolver } from '../../src/secrets/resolver.js';
import { SecretResolutionError, type SecretsConfig } from '../../src/secrets/types.js';
import { json, startLocalApi, type LocalApi } from '../helpers/http-servers.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

/**
 * A resolution that fails after the value has been read (the value is not
 * usable as a header) is where a careless message would quote it. Every
 * rendering of the error (message, String, inspect with causes, JSON) and the
 * service's pino output of it must be free of the value and of any part of it.
 */
const VALUE = 'sk_live_7f3a9c-LEAK-CANARY-51d2';
const FRAGMENTS = [VALUE, 'LEAK-CANARY', 'sk_live_7f3a9c'];

function renderings(error: unknown): Record<string, string> {
  let logged = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString('utf8');
      done();
    },
  });
  const logger = createLogger({ level: 'trace', destination: sink });
  const secretName =
    error instanceof SecretResolutionError || error instanceof SigningKeyError ? error.secretName : undefined;
  logger.warn({ err: error, secretName, webhookId: 'crm' }, 'could not resolve the API key');
  logger.child({ webhookId: 'crm' }).error(error instanceof Error ? error : new Error(String(error)));
  return {
    message: error instanceof Error ? error.message : '',
    string: String(error),
    inspect: inspect(error, { depth: 10, showHidden: true }),
    json: JSON.stringify(error),
    pino: logged,
  };
}

function expectNoValue(error: unknown): void {
  expect(error instanceof SecretResolutionError || error instanceof SigningKeyError).toBe(true);
  const rendered = renderings(error);
  expect(rendered.pino).toContain('could not resolve the API key');
  for (const [how, text] of Object.entries(rendered)) {
    for (const fragment of FRAGMENTS) expect(text, `${how} contains ${fragment}`).not.toContain(fragment);
  }
}

describe('a secret value never appears in errors or logs of a failing resolution', () => {
  let api: LocalApi;
  let directory: string;

  beforeAll(async () => {
    directory = tempDirectory('aw-leak-');
    writeFileSync(path.join(directory, 'two-lines'), `${VALUE}\nX-Injected: yes\n`);
    writeFileSync(path.join(directory, 'trailing-newlines'), `${VALUE}\n\n`);
    api = await startLocalApi();
    api.answer = (_request, response) =>
      json(response, 200, { Name: 'k', SecretString: `${VALUE}\r\n` }, 'application/x-amz-json-1.1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIALOCALTEST');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local-secret-access-key');
    vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await api.close();
  });

  it.each(['two-lines', 'trailing-newlines'])('file provider, a value with a line break (%s)', async (name) => {
    const resolver = createSecretResolver({ provider: 'file', cacheSeconds: 300, directory });
    const error = await resolver.resolve(name).catch((caught: unknown) => caught);
    expect(String(error)).toContain('got one with a control character in it');
    expectNoValue(error);
  });

  it("says nothing of the key's length, nor where its control character is, nor which it is", async () => {
    // A 24-character key with a control character at position 10.
    const key = 'abcdefghi\u0001klmnopqrstuvwx';
    expect(key).toHaveLength(24);
    const resolver = createSecretResolver(
      { provider: 'env', cacheSeconds: 300 },
      { env: { ASSET_WEBHOOKS_SECRET_K: key } },
    );
    const error = await resolver.resolve('k').catch((caught: unknown) => caught);
    for (const text of Object.values(renderings(error))) {
      expect(text).not.toMatch(/\b(10|24|0x01)\b|position/);
    }
  });

  it('env provider, a value with a control character', async () => {
    const resolver = createSecretResolver(
      { provider: 'env', cacheSeconds: 300 },
      { env: { ASSET_WEBHOOKS_SECRET_K: `${VALUE}\u0007` } },
    );
    expectNoValue(await resolver.resolve('k').catch((caught: unknown) => caught));
  });

  it('aws provider through the SDK, a SecretString ending in CR LF', async () => {
    const config: SecretsConfig = {
      provider: 'aws',
      cacheSeconds: 300,
      aws: { region: 'eu-west-1', endpoint: api.origin },
    };
    const error = await createSecretResolver(config)
      .resolve('k')
      .catch((caught: unknown) => caught);
    expect(String(error)).toContain('got one with a control character in it');
    // Nothing of the value: neither where the character is nor how long the value is.
    expect(String(error)).not.toMatch(/\b3[23]\b/);
    expectNoValue(error);
  });

  it.each([
    [
      'a key without the whsec_ prefix',
      `whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ${VALUE}`,
      /key 2 of 2 to start with whsec_/,
    ],
    ['a key that is not base64', `whsec_${VALUE}`, /key 1 of 1 to be whsec_ followed by base64/],
    [
      'a key of one base64 character too many',
      `whsec_${'A'.repeat(33)} whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw`,
      /key 1 of 2 to be whsec_ followed by base64/,
    ],
    ['a value of spaces only', '   ', /expected one or more whsec_ keys separated by spaces, got none/],
    [
      'a key of 3 bytes',
      'whsec_AAAA',
      /^SigningKeyError: signing secret "crm-signing": expected key 1 of 1 to be at least 24 bytes once decoded \(the Standard Webhooks minimum\), got a shorter key$/,
    ],
    [
      'a key of 23 bytes beside a valid one',
      `whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_${Buffer.from('LEAK-CANARY-0123456789ab').subarray(0, 23).toString('base64')}`,
      /key 2 of 2 to be at least 24 bytes once decoded/,
    ],
  ])('signing keys, %s', (_what, value, expected) => {
    const error = (() => {
      try {
        signingKeys('crm-signing', value);
        return undefined;
      } catch (caught) {
        return caught;
      }
    })();
    expect(String(error)).toMatch(expected);
    expectNoValue(error);
  });

  it('a signing key below the Standard Webhooks minimum, refused when an attempt resolves the secret, naming it and never the key', async () => {
    const resolver = createSecretResolver(
      { provider: 'env', cacheSeconds: 300 },
      { env: { ASSET_WEBHOOKS_SECRET_CRM_SIGNING: 'whsec_AAAA' } },
    );
    const error: unknown = await signedHeaders(resolver, 'crm-signing', 'msg_0123456789abcdef_1', '{}').catch(
      (caught: unknown) => caught,
    );
    expect(String(error)).toBe(
      'SigningKeyError: signing secret "crm-signing": expected key 1 of 1 to be at least 24 bytes once decoded (the Standard Webhooks minimum), got a shorter key',
    );
    expectNoValue(error);
    for (const text of Object.values(renderings(error))) expect(text).not.toContain('AAAA');
  });

  it('the service logger also redacts header values passed to it by mistake', () => {
    let output = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        output += chunk.toString('utf8');
        done();
      },
    });
    createLogger({ level: 'info', destination: sink }).info(
      { headers: { 'X-API-Key': VALUE }, request: { headers: { 'x-api-key': VALUE } } },
      'delivery',
    );
    expect(output).toContain('delivery');
    expect(output).not.toContain('LEAK-CANARY');
  });
});
