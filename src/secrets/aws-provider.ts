import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { causeMessage, SecretResolutionError, type SecretProvider } from './types.js';

export interface AwsSettings {
  readonly region: string;
  /** Overrides the service URL (a VPC endpoint, LocalStack, a local server in tests). */
  readonly endpoint?: string | undefined;
}

/** Time limits of one call, so a stalled Secrets Manager cannot hold a delivery forever. */
const CONNECTION_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 10_000;

/**
 * AWS Secrets Manager `GetSecretValue` through @aws-sdk/client-secrets-manager,
 * authenticated by the SDK's default credential chain (environment, shared
 * files, web identity, ECS or EC2 roles). NAME is the SecretId (a name or an
 * ARN); the SecretString is the key, and a binary-only secret is an error. The
 * SDK is loaded on first use, so deployments on other providers never load it.
 */
export function awsProvider(settings: AwsSettings): SecretProvider {
  let sdk:
    | Promise<{
        client: SecretsManagerClient;
        command: typeof import('@aws-sdk/client-secrets-manager').GetSecretValueCommand;
      }>
    | undefined;
  const load = async () => {
    const { SecretsManagerClient: Client, GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
    const client = new Client({
      region: settings.region,
      ...(settings.endpoint === undefined ? {} : { endpoint: settings.endpoint }),
      requestHandler: { connectionTimeout: CONNECTION_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
    });
    return { client, command: GetSecretValueCommand };
  };
  return {
    name: 'aws',
    async read(secretName) {
      let secretString: string | undefined;
      try {
        sdk ??= load();
        const { client, command } = await sdk;
        ({ SecretString: secretString } = await client.send(new command({ SecretId: secretName })));
      } catch (error) {
        throw new SecretResolutionError(secretName, 'aws', `GetSecretValue failed: ${causeMessage(error)}`, {
          cause: error,
        });
      }
      if (secretString === undefined) {
        throw new SecretResolutionError(secretName, 'aws', 'expected a SecretString, got a binary secret or none');
      }
      return secretString;
    },
  };
}
