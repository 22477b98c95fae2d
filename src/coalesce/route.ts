import type { AssetState, EventType, ExclusionCheck } from '../interfaces.js';

/** What the coalescer needs of one configured webhook. */
export interface RoutedWebhook {
  readonly id: string;
  readonly enabled: boolean;
  readonly batchSize: number;
  /** The spec's checks (filter pipeline): null = deliver. */
  evaluate(eventType: EventType, asset: AssetState): ExclusionCheck | null;
}

/** An event's route to one webhook before packing: deliver, or the named reason it is not. */
export type Route = 'deliver' | ExclusionCheck | 'collapsed';

/**
 * Decides one event's route to one webhook. Order: a collapsed EDITED is
 * `collapsed` everywhere; a disabled webhook receives nothing (not even
 * PURGED); an event of an asset gone by coalescing time is `asset_gone` except
 * PURGED; PURGED passes; then the webhook's own checks.
 */
export function routeEvent(
  webhook: RoutedWebhook,
  event: { readonly eventType: EventType; readonly asset: AssetState | null; readonly collapsedInto: string | null },
): Route {
  if (event.collapsedInto !== null) return 'collapsed';
  if (!webhook.enabled) return 'disabled';
  if (event.eventType === 'PURGED') return 'deliver';
  if (event.asset === null) return 'asset_gone';
  return webhook.evaluate(event.eventType, event.asset) ?? 'deliver';
}
