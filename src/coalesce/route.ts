import type { WebhookChecks } from '../filters/compile.js';
import type { RoutingIndex } from '../filters/routing-index.js';
import type { DecimalId } from '../interfaces.js';
import { serializeEvent } from '../payloads/serialize.js';
import type { ClaimedEvent } from './claim.js';
import { collapsedInto } from './collapse.js';
import type { Batch, Packer } from '../payloads/pack.js';
import { NOTHING_SEEN, type SeenRow } from '../payloads/seen-row.js';
import type { RoutingFeature } from './routing-feature.js';
import type { SeenValues } from './seen.js';

/**
 * An event's route to one webhook: `deliver`, `collapsed` (an EDITED merged
 * into a later one: decided before every check), `disabled`, `asset_gone`,
 * `in_trash` (an EDITED or REVERSION of an asset in the Trash, for every
 * webhook, see ClaimedEvent.inTrash), or `excluded` by one of the webhook's
 * own checks, or `unmatched`: excluded, and sent as UNMATCHED instead by a
 * routing feature (a mirror webhook's, see RoutingFeature.unmatchedFor). Counted per run (metrics); the check that excluded an
 * event is named by asset_webhooks.event_outcomes.
 */
export const ROUTES = ['deliver', 'collapsed', 'disabled', 'asset_gone', 'in_trash', 'excluded', 'unmatched'] as const;
export type Route = (typeof ROUTES)[number];

/** What a run routes by: the recorded configuration, its index, and a packer per webhook (same positions). */
export interface Routing {
  readonly routingId: number;
  readonly index: RoutingIndex;
  readonly seen: SeenValues;
  readonly packers: readonly Packer[];
  /** The run's parts of the routing features that have something to do (RoutingFeatureKind.of). */
  readonly features: readonly RoutingFeature[];
}

/** One event's routes as stored: what routing saw, and the webhooks (positions) and batches that carry it. */
export interface RoutedEvent {
  /** What routing saw of the asset (SeenValues.of). */
  readonly seen: SeenRow;
  readonly positions: number[];
  readonly batches: Batch[];
  /** The positions among `positions` that got the event as an UNMATCHED (RoutingFeature.unmatchedFor). */
  readonly unmatched: number[];
}

/**
 * Routes and packs one chunk: each event is evaluated only against the
 * webhooks the index finds for it (see RoutingIndex), and what is stored per
 * event follows the webhooks that receive it; the others' outcomes are
 * derived from what routing saw (see SeenValues). Counts every event's route
 * to every configured webhook in `counts`.
 */
export function routeChunk(
  rows: readonly ClaimedEvent[],
  routing: Routing,
  counts: Partial<Record<Route, number>>,
): { routes: RoutedEvent[]; atomIds: Array<DecimalId | null>; collapsed: Array<string | null> } {
  const { index, packers, seen, features } = routing;
  const disabled = index.size - index.enabledCount;
  const routes = new Array<RoutedEvent>(rows.length);
  const atomIds: Array<DecimalId | null> = new Array<DecimalId | null>(rows.length);
  const collapsed: Array<string | null> = new Array<string | null>(rows.length);
  let delivered = 0;
  let excluded = 0;
  let gone = 0;
  let merged = 0;
  let unmatched = 0;
  let trashed = 0;
  for (let i = 0; i < rows.length; i += 1) {
    const row = rows[i]!;
    const into = collapsedInto(row);
    // EDITED reflects the asset at delivery time: its latest atom now.
    const atomId =
      row.eventType === 'PURGED'
        ? null
        : row.eventType === 'EDITED'
          ? (row.asset?.latestAtomId ?? row.atomId)
          : row.atomId;
    atomIds[i] = atomId;
    collapsed[i] = into;
    if (into !== null) {
      // Collapsed for every webhook, before any check: nothing to evaluate or keep.
      merged += 1;
      routes[i] = { seen: NOTHING_SEEN, positions: [], batches: [], unmatched: [] };
      continue;
    }
    if (row.inTrash && row.asset !== null) {
      // Excluded for every enabled webhook before its own checks, as asset_gone is:
      // nothing to evaluate, and no UNMATCHED (the asset's membership is unchanged).
      trashed += 1;
      routes[i] = { seen: NOTHING_SEEN, positions: [], batches: [], unmatched: [] };
      continue;
    }
    const receivers = index.deliveringTo(row.eventType, row.asset);
    const positions = new Array<number>(receivers.length);
    const batches = new Array<Batch>(receivers.length);
    for (const feature of features) feature.begin({ ...row, assetUuid: row.assetUuid ?? '', atomId });
    if (receivers.length > 0) {
      const json = serializeEvent({
        atomId,
        eventId: row.eventId,
        eventTimestamp: row.eventTimestamp,
        assetId: row.assetId,
        assetUuid: row.assetUuid ?? '',
        eventType: row.eventType,
      });
      for (let k = 0; k < receivers.length; k += 1) {
        const position = receivers[k]!;
        let sentJson = json;
        for (const feature of features) sentJson = feature.delivered(position, sentJson);
        positions[k] = position + 1;
        batches[k] = packers[position]!.add(row.eventId, sentJson, sentJson !== json);
      }
    }
    const unmatchedTo: number[] = [];
    for (const feature of features)
      feature.unmatchedFor(receivers, (position, json) => {
        positions.push(position + 1);
        batches.push(packers[position]!.add(row.eventId, json, true));
        unmatchedTo.push(position + 1);
      });
    unmatched += unmatchedTo.length;
    delivered += receivers.length;
    if (row.eventType !== 'PURGED' && row.asset === null) gone += index.enabledCount;
    else excluded += index.enabledCount - receivers.length - unmatchedTo.length;
    routes[i] = {
      seen: row.eventType === 'PURGED' ? NOTHING_SEEN : seen.of(row.asset),
      positions,
      batches,
      unmatched: unmatchedTo,
    };
  }
  const add = (route: Route, n: number): void => {
    if (n > 0) counts[route] = (counts[route] ?? 0) + n;
  };
  add('deliver', delivered);
  add('excluded', excluded);
  add('unmatched', unmatched);
  add('asset_gone', gone);
  add('in_trash', trashed * index.enabledCount);
  add('collapsed', merged * index.size);
  add('disabled', (rows.length - merged) * disabled);
  return { routes, atomIds, collapsed };
}
