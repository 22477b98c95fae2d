import type { Params } from '../db/columns.js';
import type { AssetState, DecimalId, EventType } from '../interfaces.js';
import type { ClaimedEvent, FeatureRead } from './claim.js';
import type { RoutedWebhook } from './routed-webhooks.js';

/**
 * Coalescing's extension point: a routing feature (the mirror webhooks today)
 * changes what some webhooks get of the events routed to them, and may send
 * webhooks an event in place of one their checks exclude (an UNMATCHED). A
 * run asks each kind it is given (CoalesceOptions.features) for its part of
 * the run, then calls that part at fixed points of each chunk, in this order:
 * the claim reads `read` with the chunk; `absorb` takes the chunk's rows;
 * for each event routed, `begin`, then `delivered` for each webhook that
 * receives it, then `unmatchedFor`; last `chunkWrite`, whose statement
 * commits with the chunk. Coalescing imports no feature: which are on is
 * decided by the caller (src/service/routing-features.ts).
 */
export interface RoutingFeatureKind {
  /** Its part of a run routing `webhooks` (in routing order); null when it has nothing to do for them. */
  of(webhooks: readonly RoutedWebhook[]): RoutingFeature | null;
}

/** An event as a feature sees it while it is routed. */
export interface FeatureEvent {
  readonly eventId: string;
  readonly eventType: EventType;
  /** Its eventTimestamp as every webhook gets it (see AssetClock), ISO with milliseconds. */
  readonly eventTimestamp: string;
  readonly assetId: DecimalId;
  /** '' when neither the outbox nor the asset has one. */
  readonly assetUuid: string;
  /** As delivered (the latest atom for EDITED). */
  readonly atomId: DecimalId | null;
  /** The asset's state at routing time; null when gone. */
  readonly asset: AssetState | null;
}

/** One run's part of a routing feature. Its calls come in the order RoutingFeatureKind gives. */
export interface RoutingFeature {
  readonly read: FeatureRead;
  /**
   * Takes a chunk's rows as claimed (ClaimedEvent.featureColumns holds what
   * `read` gave), before the chunk is stamped. A chunk is read before the two
   * before it are written: what they changed is not in the rows.
   */
  absorb(rows: readonly ClaimedEvent[]): void;
  /**
   * The latest eventTimestamp (epoch milliseconds) the feature knows was sent
   * for the row's asset, from what `read` gave; null when none. The run's
   * clock raises the asset's next eventTimestamp above it (AssetClock).
   */
  lastSentMs(row: ClaimedEvent): number | null;
  /** Starts routing `event`. */
  begin(event: FeatureEvent): void;
  /**
   * The JSON the webhook at `position` gets of the event it receives: `json`
   * (what every other webhook gets), or one of its own, which makes the
   * payload that carries it its webhook's alone (Batch.tailored).
   */
  delivered(position: number, json: string): string;
  /**
   * Calls `send(position, json)` for each webhook not in `receivers` that gets
   * an UNMATCHED of the event instead of nothing.
   */
  unmatchedFor(receivers: readonly number[], send: (position: number, json: string) => void): void;
  /**
   * The chunk's own writes, as the body of one CTE of the chunk's statement
   * (its parameters added to `params`), or null when it has none. Called once
   * per chunk routed, in order; the statement commits before the chunk three
   * after it is read.
   */
  chunkWrite(params: Params): string | null;
}
