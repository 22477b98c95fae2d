import type { SecretProvider } from './types.js';
import { SecretResolutionError } from './types.js';

export interface AwsSettings {
  readonly region: string;
  /** Overrides the service URL (a VPC endpoint, or a local server in tests). */
  readonly endpoint?: string | undefined;
}

/**
 * AWS Secrets Manager GetSecretValue through @aws-sdk/client-secrets-manager,
 * with the SDK's default credential chain. NAME is the SecretId; the
 * SecretString is the key. The SDK is loaded on first use.
 */
export function awsProvider(settings: AwsSettings): SecretProvider {
  type Client = { send(command: unknown): Promise<{ SecretString?: string }> };
  let client: Promise<{ client: Client; command: new (input: { SecretId: string }) => unknown }> | undefined;
  const connect = async () => {
    const sdk = await import('@aws-sdk/client-secrets-manager');
    return {
      client: new sdk.SecretsManagerClient({ region: settings.region, ...(settings.endpoint ? { endpoint: settings.endpoint } : {}) }) as unknown as Client,
      command: sdk.GetSecretValueCommand as unknown as new (input: { SecretId: string }) => unknown,
    };
  };
  return {
    name: 'aws',
    async read(secretName) {
      try {
        client ??= connect();
        const { client: sdkClient, command } = await client;
        const output = await sdkClient.send(new command({ SecretId: secretName }));
        if (output.SecretString === undefined) throw new Error('expected a SecretString, got a binary secret or none');
        return output.SecretString;
      } catch (error) {
        throw new SecretResolutionError(secretName, 'aws', `GetSecretValue failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`, { cause: error });
      }
    },
  };
}
