import { SecretResolutionError, type SecretProvider } from './types.js';

/** `crm-api-key` → `ASSET_WEBHOOKS_SECRET_CRM_API_KEY`: upper-cased, every character outside A-Z and 0-9 as `_`. */
export function envVariableName(secretName: string): string {
  return `ASSET_WEBHOOKS_SECRET_${secretName.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/** Reads the variable {@link envVariableName} names from `env` (process.env in the service). */
export function envProvider(env: NodeJS.ProcessEnv): SecretProvider {
  return {
    name: 'env',
    async read(secretName) {
      const variable = envVariableName(secretName);
      const value = env[variable];
      if (value === undefined) {
        throw new SecretResolutionError(
          secretName,
          'env',
          `expected the environment variable ${variable} to be set, got nothing`,
        );
      }
      return value;
    },
  };
}
