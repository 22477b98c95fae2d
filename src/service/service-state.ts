import type pg from 'pg';
import type { Logger } from 'pino';
import type { Config, WebhookConfig } from '../config/schema.js';
import { redactedUrl } from '../config/schema.js';
import type { RoutedWebhook } from '../coalesce/route.js';
import { routedWebhooks } from '../coalesce/routed-webhooks.js';
import type { DeliveryContext, DeliverySettings, DeliveryWebhook } from '../delivery/deliver.js';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { HttpSender } from '../delivery/http/sender.js';
import { SettleBatcher } from '../delivery/settle-batcher.js';
import { createSecretResolver } from '../secrets/resolver.js';
import type { SecretResolver } from '../secrets/types.js';
import type { ServiceMetrics } from './metrics.js';

/**
 * Everything derived from one configuration document: compiled webhooks for
 * coalescing, the HTTP sender and secret resolver for delivery. A reload builds
 * a new state and swaps it in; jobs already running keep the one they started
 * with.
 */
export class ServiceState {
  readonly routed: readonly RoutedWebhook[];
  private readonly byId: ReadonlyMap<string, WebhookConfig>;
  readonly sender: HttpSender;
  readonly secrets: SecretResolver;

  constructor(readonly config: Config) {
    const settings = config.assetUpdater;
    this.routed = routedWebhooks(settings.webhooks);
    this.byId = new Map(settings.webhooks.map((webhook) => [webhook.id, webhook]));
    this.sender = new HttpSender({
      timeoutMs: settings.requestTimeoutSeconds * 1000,
      allowPrivateAddresses: settings.network.allowPrivateAddresses,
    });
    this.secrets = createSecretResolver(settings.secrets);
  }

  get settings(): Config['assetUpdater'] {
    return this.config.assetUpdater;
  }

  webhook(id: string): DeliveryWebhook | undefined {
    return this.byId.get(id);
  }

  deliverySettings(): DeliverySettings {
    const { retry, requestTimeoutSeconds, maxRequestsInFlight } = this.settings;
    return { ...retry, requestTimeoutSeconds, maxRequestsInFlight };
  }

  /** Stops the sender once its in-flight requests have finished. */
  async close(): Promise<void> {
    await this.sender.close();
  }
}

/** A delivery context that always reads the current state (reloads swap it), and time from `clock`. */
export function deliveryContext(
  pool: pg.Pool,
  current: () => ServiceState,
  logger: Logger,
  metrics: ServiceMetrics,
  stopping?: AbortSignal,
  clock: () => Date = () => new Date(),
): DeliveryContext {
  return {
    pool,
    settler: new SettleBatcher(pool),
    get sender() {
      return current().sender;
    },
    get secrets() {
      return current().secrets;
    },
    webhook: (id) => current().webhook(id),
    settings: () => current().deliverySettings(),
    logger,
    now: clock,
    onAttempt: (webhookId, result) => metrics.recordAttempt(webhookId, result),
    stopping,
  };
}

/**
 * Writes the configured webhooks to asset_webhooks.webhooks (for the views and
 * the delivery pumps' claims). Webhooks no longer configured are marked
 * disabled: their waiting payloads stay and expire. The pumps are then woken,
 * so a webhook enabled again resumes its waiting payloads at once.
 *
 * Returns the ids of webhooks already recorded whose row it changed: at start
 * or reload, what the new configuration changed; before a coalescing run, what
 * another `run` process with a different configuration had written.
 */
export async function syncWebhooks(pool: pg.Pool, config: Config): Promise<string[]> {
  const webhooks = config.assetUpdater.webhooks;
  const { rows } = await pool.query<{ webhook_id: string }>(
    `with configured as (
       select * from unnest($1::text[], $2::text[], $3::boolean[], $4::int[]) as c(webhook_id, url, enabled, concurrency)
     ),
     upserted as (
       insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency, updated_at)
       select webhook_id, url, enabled, concurrency, now() from configured
       on conflict (webhook_id) do update
         set url = excluded.url, enabled = excluded.enabled, concurrency = excluded.concurrency, updated_at = now()
         where (webhooks.url, webhooks.enabled, webhooks.concurrency) is distinct from (excluded.url, excluded.enabled, excluded.concurrency)
       returning webhook_id, xmax <> 0 as updated
     ),
     disabled as (
       update asset_webhooks.webhooks w set enabled = false, updated_at = now()
       where w.enabled and w.webhook_id not in (select webhook_id from configured)
       returning w.webhook_id
     )
     select webhook_id from upserted where updated
     union all
     select webhook_id from disabled
     order by webhook_id`,
    [
      webhooks.map((webhook) => webhook.id),
      webhooks.map((webhook) => redactedUrl(webhook.url)),
      webhooks.map((webhook) => webhook.enabled),
      webhooks.map((webhook) => webhook.concurrency),
    ],
  );
  if (rows.length > 0) await announcePayloadsReady(pool);
  return rows.map((row) => row.webhook_id);
}
