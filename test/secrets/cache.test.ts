import { describe, expect, it } from 'vitest';
import { createSecretResolver } from '../../src/secrets/resolver.js';

/** An env provider over a mutable environment and a clock the test moves. */
function setup(cacheSeconds: number) {
  const env: NodeJS.ProcessEnv = { ASSET_WEBHOOKS_SECRET_CRM: 'v1' };
  let now = 1_000_000;
  const resolver = createSecretResolver({ provider: 'env', cacheSeconds }, { env, now: () => now });
  return { env, resolver, advance: (seconds: number) => void (now += seconds * 1000) };
}

describe('caching for cacheSeconds on the injected clock', () => {
  it('reuses a value until cacheSeconds have passed, then reads the rotated one', async () => {
    const { env, resolver, advance } = setup(300);
    expect(await resolver.resolve('crm')).toBe('v1');
    env.ASSET_WEBHOOKS_SECRET_CRM = 'v2';
    advance(299);
    expect(await resolver.resolve('crm')).toBe('v1');
    advance(1);
    expect(await resolver.resolve('crm')).toBe('v2');
  });

  it('invalidate() makes the next resolve read the rotated value at once (after a 401 or 403)', async () => {
    const { env, resolver } = setup(300);
    expect(await resolver.resolve('crm')).toBe('v1');
    env.ASSET_WEBHOOKS_SECRET_CRM = 'rotated';
    expect(await resolver.resolve('crm')).toBe('v1');
    resolver.invalidate('crm');
    expect(await resolver.resolve('crm')).toBe('rotated');
  });

  it('invalidate() forgets only the name given', async () => {
    const { env, resolver } = setup(300);
    env.ASSET_WEBHOOKS_SECRET_OTHER = 'o1';
    await resolver.resolve('crm');
    await resolver.resolve('other');
    env.ASSET_WEBHOOKS_SECRET_CRM = 'v2';
    env.ASSET_WEBHOOKS_SECRET_OTHER = 'o2';
    resolver.invalidate('crm');
    expect(await resolver.resolve('crm')).toBe('v2');
    expect(await resolver.resolve('other')).toBe('o1');
  });

  it('cacheSeconds 0 reads on every resolve', async () => {
    const { env, resolver } = setup(0);
    expect(await resolver.resolve('crm')).toBe('v1');
    env.ASSET_WEBHOOKS_SECRET_CRM = 'v2';
    expect(await resolver.resolve('crm')).toBe('v2');
  });

  it('does not cache a failure: the next resolve asks again', async () => {
    const { env, resolver } = setup(300);
    delete env.ASSET_WEBHOOKS_SECRET_CRM;
    await expect(resolver.resolve('crm')).rejects.toThrow(/to be set, got nothing/);
    env.ASSET_WEBHOOKS_SECRET_CRM = 'created-later';
    expect(await resolver.resolve('crm')).toBe('created-later');
  });
});
