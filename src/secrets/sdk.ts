import { UserError } from '../errors.js';
import type { SecretProviderName } from './types.js';

/**
 * The cloud SDK each secrets provider loads, and the range of it this code is
 * written against. They are optional peer dependencies: a production install
 * holds only the one its deployment added, so each provider checks for its
 * own when it is created, not when the first secret is read.
 */
const SDKS = {
  gcp: { name: '@google-cloud/secret-manager', range: '^7.2.0' },
  aws: { name: '@aws-sdk/client-secrets-manager', range: '^3.1162.0' },
} as const satisfies Partial<Record<SecretProviderName, { name: string; range: string }>>;

/**
 * @throws UserError `secrets_sdk_missing`, one line naming the package and how
 *   to add it, when the provider's SDK cannot be resolved from this module.
 */
export function requireSdk(provider: keyof typeof SDKS): void {
  const sdk = SDKS[provider];
  try {
    import.meta.resolve(sdk.name);
  } catch {
    throw new UserError(
      'secrets_sdk_missing',
      `secrets.provider: ${provider} needs the package ${sdk.name}, which is not installed; add it next to asset-webhooks: npm install '${sdk.name}@${sdk.range}'`,
    );
  }
}
