import type pg from 'pg';
import type { Logger } from 'pino';
import type { Config, WebhookConfig } from '../config/schema.js';
import { redactedUrl } from '../config/schema.js';
import type { RoutedWebhook } from '../coalesce/routed-webhooks.js';
import { routedWebhooks } from '../coalesce/routed-webhooks.js';
import type { DeliveryContext, DeliverySettings, DeliveryWebhook } from '../delivery/context.js';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { HttpSender } from '../delivery/http/sender.js';
import { resumeWebhooks } from '../lifecycle/transitions.js';
import { Completer } from '../delivery/completer.js';
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
    // First: it throws when the provider's SDK is missing, and then no sender is left open.
    this.secrets = createSecretResolver(settings.secrets);
    this.sender = new HttpSender({
      timeoutMs: settings.requestTimeoutSeconds * 1000,
      allowPrivateAddresses: settings.network.allowPrivateAddresses,
      proxy: settings.network.proxy,
      // The edge of the process: HTTPS_PROXY and NO_PROXY apply when network.proxy is unset.
      env: process.env,
    });
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

/**
 * A delivery context that always reads the current state (reloads swap it).
 * It holds no clock: the database's (asset_webhooks.now()) decides claims,
 * retry times, expiry and recovery.
 */
export function deliveryContext(
  pool: pg.Pool,
  installationId: string,
  current: () => ServiceState,
  logger: Logger,
  metrics: ServiceMetrics,
  stopping?: AbortSignal,
): DeliveryContext {
  return {
    pool,
    installationId,
    completer: new Completer(pool),
    get sender() {
      return current().sender;
    },
    get secrets() {
      return current().secrets;
    },
    webhook: (id) => current().webhook(id),
    settings: () => current().deliverySettings(),
    logger,
    onAttempt: (webhookId, result) => metrics.recordAttempt(webhookId, result),
    onClaim: (claimed) => metrics.deliveryClaims.inc({ result: claimed > 0 ? 'payloads' : 'none' }),
    onSweep: (outcome) => metrics.deliverySweeps.inc({ outcome }),
    stopping,
  };
}

/**
 * Writes the configured webhooks to asset_webhooks.webhooks (for the views and
 * the delivery pumps' claims). Webhooks no longer configured are marked
 * disabled. When a row changed, the pumps are woken, so a webhook enabled or
 * resumed again sends its waiting payloads at once.
 *
 * It also records the webhooks of this process's configuration under its id
 * (asset_webhooks.record_configuration): the pending payloads of a webhook in
 * the configuration of no running `run` process are dead-lettered as
 * `webhook_removed`, and logged, rather than left to expire. A webhook merely
 * absent from this process's document is not removed while another running
 * process still has it (a rolling change); a disabled webhook is not removed.
 * A process whose lease is free without a clean stop still counts as running
 * until its lease has been free for crash recovery's grace, as this process
 * sees it (asset_webhooks.process_gone_grace: none before its own lease is
 * settled, nor for a recorder without a lease), so a lease connection lost
 * for a moment removes nothing.
 *
 * A webhook that is enabled and `paused` gets paused_since, by the one clock
 * (kept from an earlier pause if it is still set). A new url ends a
 * suspension by a 410 Gone answer (gone_since: retry.disableOnGone): the
 * receiver that answered it is no longer the one sent to. Then every other
 * webhook whose paused_since is set and that no 410 holds is resumed
 * (asset_webhooks.resume_webhooks,
 * through resumeWebhooks of src/lifecycle/transitions.ts), in one transaction
 * that clears it and moves each of its waiting payloads' series_started_at
 * forward by the time that payload spent paused: the time paused never counts
 * towards expiry, and a payload created during the pause starts its window at
 * the resume. The row lock on the webhook makes concurrent resumes (several
 * `run` processes reloading) shift once: the second finds paused_since already
 * cleared. `enabled: false` wins over `paused`: a disabled webhook is not
 * paused, its payloads expire.
 *
 * Each webhook's rateLimit is recorded in its queue row (see recordRateLimits).
 *
 * Returns the ids of webhooks already recorded whose row it changed: at start
 * or reload, what the new configuration changed; before a coalescing run, what
 * another `run` process with a different configuration had written.
 */
export async function syncWebhooks(pool: pg.Pool, config: Config, recorder: ConfigurationRecorder): Promise<string[]> {
  const webhooks = config.assetUpdater.webhooks;
  // After the rows: a new url must have cleared a 410's suspension for its webhook to be resumed.
  const changed = await writeWebhookRows(pool, webhooks);
  const resumed = await resumeWebhooks(
    pool,
    webhooks.filter(pausedIn).map((webhook) => webhook.id),
  );
  await recordRateLimits(pool, webhooks);
  await recordConfiguration(pool, webhooks, recorder);
  if (changed.length > 0 || resumed.length > 0) await announcePayloadsReady(pool);
  return [...new Set([...resumed, ...changed])].sort();
}

/** Who records a configuration: see syncWebhooks. */
export interface ConfigurationRecorder {
  readonly processId: string;
  readonly logger: Logger;
  /** The request timeout of a recorder that holds a lease: the grace is then read from it (process_gone_grace). */
  readonly requestTimeoutSeconds?: () => number;
}

/**
 * A `run` process, which holds its lease, as the recorder of its
 * configuration: crash recovery's grace is read at each recording, in the
 * same statement (asset_webhooks.process_gone_grace).
 */
export function processRecorder(
  processId: string,
  logger: Logger,
  requestTimeoutSeconds: () => number,
): ConfigurationRecorder {
  return { processId, logger, requestTimeoutSeconds };
}

/** Whether the configuration pauses a webhook: `enabled: false` wins over `paused`. */
function pausedIn(webhook: WebhookConfig): boolean {
  return webhook.enabled && webhook.paused;
}

/**
 * Writes the configured webhooks' rows, a pause's start by the one clock
 * (asset_webhooks.now()), and disables the rows of webhooks no longer
 * configured. Returns the ids of the rows already there that it changed.
 */
async function writeWebhookRows(pool: pg.Pool, webhooks: readonly WebhookConfig[]): Promise<string[]> {
  const { rows } = await pool.query<{ webhook_id: string }>(
    `with clock as materialized (select asset_webhooks.now() as now),
     configured as (
       select * from unnest($1::text[], $2::text[], $3::boolean[], $4::int[], $5::boolean[]) as c(webhook_id, url, enabled, concurrency, paused)
     ),
     -- An insert and an update rather than an upsert: ON CONFLICT DO UPDATE
     -- locks every existing row, changed or not, and a webhook's row is its
     -- claim lock (claim_payloads), which a backfill's write holds.
     inserted as (
       insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency, paused_since, config_paused, updated_at)
       select webhook_id, url, enabled, concurrency, case when paused then clock.now end, paused, clock.now from configured, clock
       on conflict (webhook_id) do nothing
     ),
     updated as (
       update asset_webhooks.webhooks w
       -- A pause already under way keeps its start; only the resume clears it.
       -- A new url ends a 410's suspension (the resume after this statement
       -- then moves its payloads' windows, unless the document pauses it).
       set url = k.url, enabled = k.enabled, concurrency = k.concurrency,
           paused_since = coalesce(w.paused_since, case when k.paused then clock.now end), config_paused = k.paused,
           gone_since = case when w.url = k.url then w.gone_since end,
           gone_payload_id = case when w.url = k.url then w.gone_payload_id end,
           updated_at = clock.now
       from configured k, clock
       where w.webhook_id = k.webhook_id
         and (w.url, w.enabled, w.concurrency, w.paused_since is null, w.config_paused)
             is distinct from (k.url, k.enabled, k.concurrency, w.paused_since is null and not k.paused, k.paused)
       returning w.webhook_id
     ),
     disabled as (
       update asset_webhooks.webhooks w set enabled = false, config_paused = false, updated_at = clock.now
       from clock
       where w.enabled and w.webhook_id not in (select webhook_id from configured)
       returning w.webhook_id
     )
     select webhook_id from updated
     union all
     select webhook_id from disabled
     order by webhook_id`,
    [
      webhooks.map((webhook) => webhook.id),
      webhooks.map((webhook) => redactedUrl(webhook.url)),
      webhooks.map((webhook) => webhook.enabled),
      webhooks.map((webhook) => webhook.concurrency),
      webhooks.map(pausedIn),
    ],
  );
  return rows.map((row) => row.webhook_id);
}

/**
 * Records each webhook's rateLimit where every process's claims read it
 * (asset_webhooks.record_rate_limits): the limit is shared by all `run`
 * processes, so the rate holds whatever their number.
 */
async function recordRateLimits(pool: pg.Pool, webhooks: readonly WebhookConfig[]): Promise<void> {
  await pool.query('select asset_webhooks.record_rate_limits($1::text[], $2::float8[], $3::int[], $4::boolean[])', [
    webhooks.map((webhook) => webhook.id),
    webhooks.map((webhook) => webhook.rateLimit?.perSecond ?? null),
    webhooks.map((webhook) => webhook.rateLimit?.burst ?? null),
    webhooks.map((webhook) => webhook.rateLimit?.adaptive ?? null),
  ]);
}

/** Records this process's webhooks (asset_webhooks.record_configuration) and logs the webhooks removed. */
async function recordConfiguration(
  pool: pg.Pool,
  webhooks: readonly WebhookConfig[],
  recorder: ConfigurationRecorder,
): Promise<void> {
  const { rows: removed } = await pool.query<{ webhook_id: string; dead_lettered: number }>(
    `select webhook_id, dead_lettered
     from asset_webhooks.record_configuration($1, $2::text[], asset_webhooks.process_gone_grace($1, $3::int))`,
    [recorder.processId, webhooks.map((webhook) => webhook.id), recorder.requestTimeoutSeconds?.() ?? null],
  );
  for (const { webhook_id: webhookId, dead_lettered: payloads } of removed) {
    recorder.logger.warn(
      { webhookId, payloads, reason: 'webhook_removed' },
      'webhook is in the configuration of no running process: its waiting payloads are dead-lettered; ' +
        'send them to another webhook with `asset-webhooks dead-letters redeliver PAYLOAD_ID --to WEBHOOK_ID`',
    );
  }
}

/**
 * Deletes the configuration this process recorded, when it stops cleanly: it
 * is gone at once for the next recording, with no grace (see syncWebhooks).
 * Its webhooks are taken for removed only if no other running process has them.
 */
export async function forgetConfiguration(pool: pg.Pool, processId: string): Promise<void> {
  await pool.query('delete from asset_webhooks.process_configurations where process_id = $1', [processId]);
}
