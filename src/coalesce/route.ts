import type { WebhookChecks } from '../filters/compile.js';

/**
 * What the coalescer needs of one configured webhook: its id, its batch size
 * and what its checks read (stored once per configuration, so that the check
 * that excluded an event can be derived when asked).
 */
export interface RoutedWebhook extends WebhookChecks {
  readonly id: string;
  readonly batchSize: number;
}

/**
 * An event's route to one webhook: `deliver`, `collapsed` (an EDITED merged
 * into a later one: decided before every check), `disabled`, `asset_gone`,
 * or `excluded` by one of the webhook's own checks. Counted per run (metrics);
 * the check that excluded an event is named by asset_webhooks.event_outcomes.
 */
export type Route = 'deliver' | 'collapsed' | 'disabled' | 'asset_gone' | 'excluded';
