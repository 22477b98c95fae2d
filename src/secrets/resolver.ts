import { awsProvider } from './aws-provider.js';
import { envProvider } from './env-provider.js';
import { fileProvider } from './file-provider.js';
import { gcpProvider } from './gcp-provider.js';
import { requireSdk } from './sdk.js';
import { SecretResolutionError, type SecretProvider, type SecretResolver, type SecretsConfig } from './types.js';

/**
 * The provider the configuration names.
 *
 * @throws Error when the provider's own section is missing (directory, gcp,
 *   aws): the configuration schema refuses such a document, so this is a bug.
 * @throws UserError `secrets_sdk_missing` when the gcp or aws provider's SDK
 *   is not installed (see sdk.ts).
 */
export function createProvider(config: SecretsConfig, env: NodeJS.ProcessEnv = process.env): SecretProvider {
  switch (config.provider) {
    case 'env':
      return envProvider(env);
    case 'file':
      if (config.directory === undefined)
        throw new Error('expected secrets.directory for secrets provider file, got none');
      return fileProvider(config.directory);
    case 'gcp':
      if (config.gcp === undefined)
        throw new Error('expected secrets.gcp.projectId for secrets provider gcp, got none');
      requireSdk('gcp');
      return gcpProvider(config.gcp);
    case 'aws':
      if (config.aws === undefined) throw new Error('expected secrets.aws.region for secrets provider aws, got none');
      requireSdk('aws');
      return awsProvider(config.aws);
  }
}

/**
 * Resolves API keys through the configured provider.
 *
 * - A value is reused for cacheSeconds (on the `now` clock, Date.now by
 *   default); invalidate(name) forgets it at once, so a key rotated after a 401
 *   or 403 is read on the next attempt.
 * - Concurrent resolutions of one name share one read. A failure is not
 *   cached: the next attempt asks the provider again.
 * - A value must be usable as an X-API-Key header: not empty and without
 *   control characters (a stray line break in a secret file would otherwise
 *   fail every request, or inject a header). Such a value is refused with
 *   where the bad character is, never what the value is.
 * - Values live only in this cache and in request headers: never in logs,
 *   errors or attempt records.
 */
export function createSecretResolver(
  config: SecretsConfig,
  options: { env?: NodeJS.ProcessEnv; now?: () => number } = {},
): SecretResolver {
  const provider = createProvider(config, options.env ?? process.env);
  const now = options.now ?? Date.now;
  const cache = new Map<string, { readonly value: Promise<string>; readonly expiresAt: number }>();
  return {
    resolve(name) {
      const cached = cache.get(name);
      if (cached !== undefined && cached.expiresAt > now()) return cached.value;
      const value = provider.read(name).then((secret) => checked(secret, name, provider.name));
      cache.set(name, { value, expiresAt: now() + config.cacheSeconds * 1000 });
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

function checked(secret: string, name: string, provider: SecretProvider['name']): string {
  if (secret === '') throw new SecretResolutionError(name, provider, 'expected a value, got an empty one');
  // Said without the character, its position or the value's length: the message is
  // recorded with the attempt, and none of those may tell anything about the key.
  if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(secret)) {
    throw new SecretResolutionError(
      name,
      provider,
      'expected a value usable as an HTTP header, got one with a control character in it (usually a line break: ' +
        'a second trailing newline, or the CR of a file written with Windows line endings)',
    );
  }
  return secret;
}
