import type pg from 'pg';
import type { WebhookConfig } from '../config/schema.js';

/**
 * Whether a webhook's checks in a document (resource types, event types,
 * filters) differ from those the service last routed it by, as recorded in
 * asset_webhooks.routing_webhooks (the newest routing that names it): a
 * `reconcile --config` with other checks than the running service's sends a
 * set that the service's next coalescing runs reverse. Compared as jsonb, as
 * recordRouting stores them.
 *
 * @returns when that routing was last used, if the checks differ; undefined
 * when they are the same or no routing names the webhook yet.
 */
export async function checksDifferFromRouting(
  pool: pg.Pool,
  webhook: Pick<WebhookConfig, 'id' | 'resourceTypes' | 'eventTypes' | 'filters'>,
): Promise<Date | undefined> {
  const {
    rows: [newest],
  } = await pool.query<{ differs: boolean; last_used_at: Date }>(
    `select jsonb_build_object('resourceTypes', w.definition -> 'resourceTypes', 'eventTypes', w.definition -> 'eventTypes',
                               'filters', w.definition -> 'filters') <> $2::jsonb as differs,
            r.last_used_at
     from asset_webhooks.routing_webhooks w join asset_webhooks.routings r using (routing_id)
     where w.webhook_id = $1
     order by r.last_used_at desc, r.routing_id desc limit 1`,
    [
      webhook.id,
      JSON.stringify({
        resourceTypes: webhook.resourceTypes,
        eventTypes: webhook.eventTypes,
        filters: webhook.filters,
      }),
    ],
  );
  return newest?.differs === true ? newest.last_used_at : undefined;
}
