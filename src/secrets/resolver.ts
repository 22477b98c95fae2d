import type { SecretsConfig } from '../config/schema.js';
import { awsProvider } from './aws-provider.js';
import { envProvider } from './env-provider.js';
import { fileProvider } from './file-provider.js';
import { gcpProvider } from './gcp-provider.js';
import type { SecretProvider, SecretResolver } from './types.js';

/** The provider the configuration names. */
export function createProvider(config: SecretsConfig, env: NodeJS.ProcessEnv = process.env): SecretProvider {
  switch (config.provider) {
    case 'env':
      return envProvider(env);
    case 'file':
      return fileProvider(config.directory!);
    case 'gcp':
      return gcpProvider(config.gcp!);
    case 'aws':
      return awsProvider(config.aws!);
  }
}

/**
 * Resolves API keys through the configured provider, caching each value for
 * cacheSeconds. Concurrent resolutions of one name share one read. Values live
 * only in this cache and in request headers: never in logs, errors or records.
 */
export function createSecretResolver(config: SecretsConfig, options: { env?: NodeJS.ProcessEnv; now?: () => number } = {}): SecretResolver {
  const provider = createProvider(config, options.env);
  const now = options.now ?? Date.now;
  const cache = new Map<string, { value: Promise<string>; expiresAt: number }>();
  return {
    resolve(name) {
      const cached = cache.get(name);
      if (cached && cached.expiresAt > now()) return cached.value;
      const value = provider.read(name);
      cache.set(name, { value, expiresAt: now() + config.cacheSeconds * 1000 });
      // A failure is not cached: the next attempt asks again.
      value.catch(() => {
        if (cache.get(name)?.value === value) cache.delete(name);
      });
      return value;
    },
    invalidate(name) {
      cache.delete(name);
    },
  };
}
