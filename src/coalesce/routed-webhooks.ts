import type { WebhookConfig } from '../config/schema.js';
import type { RoutedWebhook } from './route.js';

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
