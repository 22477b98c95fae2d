import type { WebhookConfig } from '../config/schema.js';
import type { RecordedWebhook } from '../payloads/routing.js';

/**
 * What the coalescer needs of one configured webhook: what routing records of
 * it (RecordedWebhook) and its batch size.
 */
export interface RoutedWebhook extends RecordedWebhook {
  readonly batchSize: number;
}

/** The configured webhooks as the coalescer sees them. */
export function routedWebhooks(webhooks: readonly WebhookConfig[]): RoutedWebhook[] {
  return webhooks.map((webhook) => ({
    id: webhook.id,
    enabled: webhook.enabled,
    batchSize: webhook.batchSize,
    resourceTypes: webhook.resourceTypes,
    eventTypes: webhook.eventTypes,
    filters: webhook.filters,
    mirror: webhook.mirror,
  }));
}
