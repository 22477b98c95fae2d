import type { SecretProvider } from './types.js';
import { SecretResolutionError } from './types.js';

export interface GcpSettings {
  readonly projectId: string;
  /** A private or test endpoint, `host[:port]`; `http://host:port` uses plain HTTP (tests). */
  readonly apiEndpoint?: string | undefined;
}

/** The resource name for a NAME: a secret id in the project (latest version), or a full resource name. */
export function gcpResourceName(secretName: string, projectId: string): string {
  if (/^projects\/[^/]+\/secrets\/[^/]+\/versions\/[^/]+$/.test(secretName)) return secretName;
  if (/^projects\/[^/]+\/secrets\/[^/]+$/.test(secretName)) return `${secretName}/versions/latest`;
  return `projects/${projectId}/secrets/${secretName}/versions/latest`;
}

/**
 * Google Cloud Secret Manager through @google-cloud/secret-manager (its REST
 * transport), with Application Default Credentials. The SDK is loaded on first
 * use: deployments on other providers never pay for it.
 */
export function gcpProvider(settings: GcpSettings): SecretProvider {
  type Client = { accessSecretVersion(request: { name: string }): Promise<[{ payload?: { data?: Uint8Array | string | null } | null }, ...unknown[]]> };
  let client: Promise<Client> | undefined;
  const connect = async (): Promise<Client> => {
    const { SecretManagerServiceClient } = await import('@google-cloud/secret-manager');
    const endpoint = settings.apiEndpoint ? parseEndpoint(settings.apiEndpoint) : undefined;
    return new SecretManagerServiceClient({
      projectId: settings.projectId,
      fallback: true,
      ...(endpoint ?? {}),
    }) as unknown as Client;
  };
  return {
    name: 'gcp',
    async read(secretName) {
      const name = gcpResourceName(secretName, settings.projectId);
      try {
        client ??= connect();
        const [version] = await (await client).accessSecretVersion({ name });
        const data = version.payload?.data;
        if (data === undefined || data === null) throw new Error('the version has no payload');
        return typeof data === 'string' ? data : Buffer.from(data).toString('utf8');
      } catch (error) {
        throw new SecretResolutionError(secretName, 'gcp', `could not access ${name}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`, { cause: error });
      }
    },
  };
}

function parseEndpoint(endpoint: string): { apiEndpoint: string; port?: number; protocol?: string } {
  const match = /^(?:(https?):\/\/)?([^:/]+)(?::(\d+))?\/?$/.exec(endpoint);
  if (!match) return { apiEndpoint: endpoint };
  return { apiEndpoint: match[2]!, ...(match[3] ? { port: Number(match[3]) } : {}), ...(match[1] ? { protocol: match[1] } : {}) };
}
