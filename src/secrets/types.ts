/** Resolves `apikey` names to secret values (CONTRACT section 3). */
export interface SecretResolver {
  /** The current value; throws SecretResolutionError. */
  resolve(name: string): Promise<string>;
  /** Forgets a cached value, so the next resolve reads a rotated key (after a 401 or 403). */
  invalidate(name: string): void;
}

/** One provider: reads a value, uncached. */
export interface SecretProvider {
  readonly name: 'env' | 'file' | 'gcp' | 'aws';
  read(secretName: string): Promise<string>;
}

/**
 * A secret could not be resolved. The message names the secret and the
 * provider and says why; it never contains a secret value.
 */
export class SecretResolutionError extends Error {
  constructor(readonly secretName: string, readonly provider: string, reason: string, options?: { cause?: unknown }) {
    super(`secret ${JSON.stringify(secretName)} (provider ${provider}): ${reason}`, options);
    this.name = 'SecretResolutionError';
  }
}
