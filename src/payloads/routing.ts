import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { WebhookChecks } from '../filters/compile.js';

/**
 * What a routing records of one configured webhook: its id and what its checks
 * read (stored once per configuration, so that the check that excluded an
 * event can be derived when asked).
 */
export interface RecordedWebhook extends WebhookChecks {
  readonly id: string;
  /** Keeps the set of assets announced to it and gets UNMATCHED (docs/mirror.md). */
  readonly mirror?: boolean;
}

/**
 * Records the configuration a run routes by (asset_webhooks.routings and
 * routing_webhooks) and returns its id; a configuration already recorded,
 * same ids and definitions in the same order, is reused. Positions count from
 * 1 in the order of `webhooks`, which is the order routing uses.
 */
export async function recordRouting(
  client: pg.PoolClient | pg.Pool,
  webhooks: readonly RecordedWebhook[],
): Promise<number> {
  const definitions = webhooks.map((webhook) =>
    JSON.stringify({
      enabled: webhook.enabled,
      resourceTypes: webhook.resourceTypes,
      eventTypes: webhook.eventTypes,
      filters: webhook.filters,
      // Only when set, so that a configuration without mirrors keeps the digest it had before them.
      ...(webhook.mirror === true ? { mirror: true } : {}),
    }),
  );
  const digest = createHash('sha256')
    .update(JSON.stringify(webhooks.map((webhook, index) => [webhook.id, definitions[index]])))
    .digest('hex');
  const {
    rows: [routing],
  } = await client.query<{ routing_id: number }>(
    `insert into asset_webhooks.routings (digest) values ($1)
     on conflict (digest) do update set last_used_at = asset_webhooks.now()
     returning routing_id`,
    [digest],
  );
  const routingId = routing!.routing_id;
  await client.query(
    `insert into asset_webhooks.routing_webhooks (routing_id, position, webhook_id, definition)
     select $1, w.position, w.webhook_id, w.definition
     from unnest($2::text[], $3::jsonb[]) with ordinality as w(webhook_id, definition, position)
     on conflict do nothing`,
    [routingId, webhooks.map((webhook) => webhook.id), definitions],
  );
  return routingId;
}
