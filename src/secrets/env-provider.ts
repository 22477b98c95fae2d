import type { SecretProvider } from './types.js';
import { SecretResolutionError } from './types.js';

/** `crm-api-key` → `ASSET_WEBHOOKS_SECRET_CRM_API_KEY`. */
export function envVariableName(secretName: string): string {
  return `ASSET_WEBHOOKS_SECRET_${secretName.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

export function envProvider(env: NodeJS.ProcessEnv): SecretProvider {
  return {
    name: 'env',
    async read(secretName) {
      const variable = envVariableName(secretName);
      const value = env[variable];
      if (value === undefined || value === '') {
        throw new SecretResolutionError(secretName, 'env', `expected the environment variable ${variable} to be set, got nothing`);
      }
      return value;
    },
  };
}
