/**
 * The `secrets` section of the configuration (docs/configuration.md), declared
 * here by its shape so that this folder does not depend on the configuration
 * schema; the schema's output type is assignable to it.
 */
export interface SecretsConfig {
  /** Where `apikey` names are resolved. */
  readonly provider: 'env' | 'file' | 'gcp' | 'aws';
  /** How long a resolved value is reused, in seconds; 0 reads it on every resolve. */
  readonly cacheSeconds: number;
  /** provider file: the directory holding one file per secret. */
  readonly directory?: string | undefined;
  /** provider gcp: the project of bare secret ids; apiEndpoint for a private endpoint. */
  readonly gcp?: { readonly projectId: string; readonly apiEndpoint?: string | undefined } | undefined;
  /** provider aws: the region; endpoint overrides the service URL. */
  readonly aws?: { readonly region: string; readonly endpoint?: string | undefined } | undefined;
}

export type SecretProviderName = SecretsConfig['provider'];

/** Resolves `apikey` names to secret values with the configured provider. */
export interface SecretResolver {
  /** The current value, cached for cacheSeconds. Rejects with {@link SecretResolutionError}. */
  resolve(name: string): Promise<string>;
  /** Forgets a cached value, so the next resolve reads a rotated key (the caller calls it after a 401 or 403). */
  invalidate(name: string): void;
}

/** One provider: reads a value, uncached. Rejects with {@link SecretResolutionError}. */
export interface SecretProvider {
  readonly name: SecretProviderName;
  read(secretName: string): Promise<string>;
}

/**
 * A secret could not be resolved. The message names the secret and the
 * provider and says what was expected and what was found; it never contains a
 * secret value, and neither does its cause.
 */
export class SecretResolutionError extends Error {
  readonly code = 'secret_unavailable';

  constructor(
    readonly secretName: string,
    readonly provider: SecretProviderName,
    /** Why, without the value: the provider's own message or what was wrong with the value. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`secret ${JSON.stringify(secretName)} (provider ${provider}): ${reason}`, options);
    this.name = 'SecretResolutionError';
  }
}

/** The first line of an SDK error's message, as the reason of a {@link SecretResolutionError}. */
export function causeMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0]?.trim().slice(0, 300) || (error instanceof Error ? error.name : 'unknown error');
}
