import type { WebhookConfig } from '../config/schema.js';
import { compileWebhook } from '../filters/compile.js';
import type { RoutedWebhook } from './route.js';

/** The configured webhooks as the coalescer sees them: compiled once, evaluated per event. */
export function routedWebhooks(webhooks: readonly WebhookConfig[]): RoutedWebhook[] {
  return webhooks.map((webhook) => {
    const compiled = compileWebhook(webhook);
    return {
      id: webhook.id,
      enabled: webhook.enabled,
      batchSize: webhook.batchSize,
      evaluate: (eventType, asset) => compiled.evaluate(eventType, asset),
    };
  });
}
