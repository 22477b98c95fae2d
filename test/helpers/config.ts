import { stringify } from 'yaml';

/** One webhook of a test configuration, with the document's own key names; `enabled` defaults to true. */
export interface TestWebhook {
  readonly id: string;
  readonly url: string;
  readonly enabled?: boolean;
  readonly paused?: boolean;
  readonly apikey?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly signing?: { readonly secret: string };
  readonly resourceTypes?: readonly string[];
  readonly batchSize?: number;
  readonly concurrency?: number;
  readonly rateLimit?: { readonly perSecond: number; readonly burst?: number; readonly adaptive?: boolean };
  readonly mirror?: boolean;
  readonly eventTypes?: readonly string[];
  readonly filters?: ReadonlyArray<Readonly<Record<string, unknown>>>;
}

export interface TestConfigOptions {
  /** Default 1; null leaves the key out, so the 60-second default applies. */
  readonly intervalSeconds?: number | null;
  /** Left out (the service's default, 30) unless given. */
  readonly requestTimeoutSeconds?: number;
  /** Left out (the default, 14) unless given. */
  readonly retentionDays?: number;
  /** Left out (the default schedule of docs/configuration.md) unless given. */
  readonly retry?: {
    readonly delaysSeconds?: readonly number[];
    readonly deadLetterAfterSeconds?: number;
    readonly disableOnGone?: boolean;
    readonly retryStatusCodes?: readonly number[];
  };
}

/**
 * The configuration document (YAML) of a service that delivers to test
 * receivers on 127.0.0.1, so private addresses are allowed.
 */
export function receiverConfig(webhooks: readonly TestWebhook[], options: TestConfigOptions = {}): string {
  const { intervalSeconds = 1, requestTimeoutSeconds, retentionDays, retry } = options;
  return stringify({
    assetUpdater: {
      ...(intervalSeconds === null ? {} : { intervalSeconds }),
      ...(requestTimeoutSeconds === undefined ? {} : { requestTimeoutSeconds }),
      ...(retentionDays === undefined ? {} : { retentionDays }),
      network: { allowPrivateAddresses: true },
      ...(retry === undefined ? {} : { retry }),
      webhooks: webhooks.map((webhook) => ({ ...webhook, enabled: webhook.enabled ?? true })),
    },
  });
}
