import type { SecretManagerServiceClient } from '@google-cloud/secret-manager';
import { causeMessage, SecretResolutionError, type SecretProvider } from './types.js';

export interface GcpSettings {
  readonly projectId: string;
  /**
   * A private or regional endpoint, `host[:port]`, or `http://host:port` for a
   * plain-HTTP emulator. Default: secretmanager.googleapis.com.
   */
  readonly apiEndpoint?: string | undefined;
}

/**
 * The resource name to access for a NAME: a full resource name
 * `projects/P/secrets/S/versions/V` as given, `projects/P/secrets/S` at its
 * latest version, or a bare secret id in the configured project, latest version.
 */
export function gcpResourceName(secretName: string, projectId: string): string {
  if (/^projects\/[^/]+\/secrets\/[^/]+\/versions\/[^/]+$/.test(secretName)) return secretName;
  if (/^projects\/[^/]+\/secrets\/[^/]+$/.test(secretName)) return `${secretName}/versions/latest`;
  return `projects/${projectId}/secrets/${secretName}/versions/latest`;
}

/**
 * Google Cloud Secret Manager `AccessSecretVersion` through
 * @google-cloud/secret-manager, over its REST transport (`fallback: true`: no
 * gRPC channel to keep up), authenticated by Application Default Credentials
 * (GOOGLE_APPLICATION_CREDENTIALS with a service-account or workload-identity
 * file, or the metadata server on GCP). The payload's bytes are the key, as
 * UTF-8. The SDK is loaded on first use.
 */
export function gcpProvider(settings: GcpSettings): SecretProvider {
  let client: Promise<SecretManagerServiceClient> | undefined;
  const load = async (): Promise<SecretManagerServiceClient> => {
    const { SecretManagerServiceClient: Client } = await import('@google-cloud/secret-manager');
    return new Client({ projectId: settings.projectId, fallback: true, ...endpointOptions(settings.apiEndpoint) });
  };
  return {
    name: 'gcp',
    async read(secretName) {
      const name = gcpResourceName(secretName, settings.projectId);
      let data: Uint8Array | string | null | undefined;
      try {
        client ??= load();
        const [version] = await (await client).accessSecretVersion({ name });
        data = version.payload?.data;
      } catch (error) {
        throw new SecretResolutionError(secretName, 'gcp', `could not access ${name}: ${causeMessage(error)}`, {
          cause: error,
        });
      }
      if (data === undefined || data === null) {
        throw new SecretResolutionError(secretName, 'gcp', `expected a payload in ${name}, got none`);
      }
      return typeof data === 'string' ? data : Buffer.from(data).toString('utf8');
    },
  };
}

/** The client options for an apiEndpoint: `host[:port]` or `http(s)://host[:port]`. */
function endpointOptions(endpoint: string | undefined): { apiEndpoint?: string; port?: number; protocol?: string } {
  if (endpoint === undefined) return {};
  const match = /^(?:(https?):\/\/)?([^:/]+|\[[^\]]+\])(?::(\d+))?\/?$/.exec(endpoint);
  if (!match || match[2] === undefined) return { apiEndpoint: endpoint };
  return {
    apiEndpoint: match[2],
    ...(match[3] === undefined ? {} : { port: Number(match[3]) }),
    ...(match[1] === undefined ? {} : { protocol: match[1] }),
  };
}
