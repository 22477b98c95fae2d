/**
 * The verdict of a chaos run, from what the service's ledger says became of
 * each event and what the receivers actually got. Pure, so it is tested on
 * its own (bench/test/chaos-judge.test.ts).
 */

/** One row of asset_webhooks.event_outcomes. */
export interface OutcomeRow {
  readonly eventId: string;
  readonly webhookId: string;
  readonly outcome: 'delivered' | 'excluded' | 'collapsed' | 'dead_lettered' | 'pending' | string;
  /** The check that excluded the event, for `excluded`. */
  readonly excludedBy: string | null;
  /** The payload that carries the event to the webhook, for `delivered` and `dead_lettered`. */
  readonly payloadId: number | null;
  readonly collapsedInto: string | null;
}

/** One POST a receiver answered: the webhook it was sent to (by its URL) and the events in its body. */
export interface Receipt {
  readonly webhookId: string;
  readonly eventIds: readonly string[];
}

export interface Judgement {
  /** Event × webhook pairs the ledger accounts for. */
  readonly routes: number;
  readonly delivered: number;
  readonly excluded: number;
  readonly collapsed: number;
  readonly deadLettered: number;
  /** Still waiting when the run was judged. */
  readonly pending: number;
  /** Delivered by the ledger, never received. */
  readonly deliveredNotReceived: number;
  /** Collapsed into an event that neither reached the webhook nor was excluded from it. */
  readonly collapsedIntoNothing: number;
  /** Excluded without a check that names why. */
  readonly excludedUnnamed: number;
  /** Received, but the ledger says the event does not go to that webhook (excluded, collapsed) or knows no such event. */
  readonly receivedUnexpected: number;
  /** Events that did not reach a webhook they should: pending, dead-lettered, delivered but not received, collapsed into nothing. */
  readonly lost: number;
  /** Receipts beyond the first of an event at a webhook. */
  readonly duplicates: number;
  /**
   * Each duplicated event at a webhook: its payload, and whether every
   * request that carried it carried exactly that payload's events (a payload
   * sent again, not the event put in a second payload).
   */
  readonly duplicated: ReadonlyArray<{
    readonly eventId: string;
    readonly webhookId: string;
    readonly receipts: number;
    readonly payloadId: number | null;
    readonly samePayload: boolean;
  }>;
}

/**
 * Judges a run. `payloadEvents` gives the event ids of each payload that
 * carries a duplicated event (asset_webhooks.payloads.event_ids), so a
 * duplicate can be told to be the same payload sent again.
 */
export function judgeRun(
  outcomes: readonly OutcomeRow[],
  receipts: readonly Receipt[],
  payloadEvents: ReadonlyMap<number, readonly string[]>,
): Judgement {
  const key = (webhookId: string, eventId: string): string => `${webhookId}\u0000${eventId}`;
  const byRoute = new Map<string, OutcomeRow>();
  for (const row of outcomes) byRoute.set(key(row.webhookId, row.eventId), row);

  const received = new Map<string, number>();
  const requestsOf = new Map<string, string[]>();
  for (const receipt of receipts) {
    const body = [...receipt.eventIds].sort().join(',');
    for (const eventId of receipt.eventIds) {
      const k = key(receipt.webhookId, eventId);
      received.set(k, (received.get(k) ?? 0) + 1);
      (requestsOf.get(k) ?? requestsOf.set(k, []).get(k)!).push(body);
    }
  }

  let delivered = 0;
  let excluded = 0;
  let collapsed = 0;
  let deadLettered = 0;
  let pending = 0;
  let deliveredNotReceived = 0;
  let collapsedIntoNothing = 0;
  let excludedUnnamed = 0;
  for (const row of outcomes) {
    const k = key(row.webhookId, row.eventId);
    if (row.outcome === 'delivered') {
      delivered += 1;
      if (!received.has(k)) deliveredNotReceived += 1;
    } else if (row.outcome === 'excluded') {
      excluded += 1;
      if (row.excludedBy === null) excludedUnnamed += 1;
    } else if (row.outcome === 'collapsed') {
      collapsed += 1;
      if (!reachesOrExcluded(row, byRoute, received, key)) collapsedIntoNothing += 1;
    } else if (row.outcome === 'dead_lettered') deadLettered += 1;
    else pending += 1;
  }

  let receivedUnexpected = 0;
  let duplicates = 0;
  const duplicated: Array<Judgement['duplicated'][number]> = [];
  for (const [k, count] of received) {
    const [webhookId, eventId] = k.split('\u0000') as [string, string];
    const row = byRoute.get(k);
    if (row === undefined || (row.outcome !== 'delivered' && row.outcome !== 'dead_lettered')) receivedUnexpected += 1;
    if (count > 1) {
      duplicates += count - 1;
      const payloadId = row?.payloadId ?? null;
      const expected = payloadId === null ? undefined : payloadEvents.get(payloadId);
      const body = expected === undefined ? undefined : [...expected].sort().join(',');
      duplicated.push({
        eventId,
        webhookId,
        receipts: count,
        payloadId,
        samePayload: body !== undefined && requestsOf.get(k)!.every((request) => request === body),
      });
    }
  }

  return {
    routes: outcomes.length,
    delivered,
    excluded,
    collapsed,
    deadLettered,
    pending,
    deliveredNotReceived,
    collapsedIntoNothing,
    excludedUnnamed,
    receivedUnexpected,
    lost: pending + deadLettered + deliveredNotReceived + collapsedIntoNothing,
    duplicates,
    duplicated,
  };
}

/** Whether the event a collapsed one was folded into reached the webhook, or was excluded from it by a check. */
function reachesOrExcluded(
  row: OutcomeRow,
  byRoute: ReadonlyMap<string, OutcomeRow>,
  received: ReadonlyMap<string, number>,
  key: (webhookId: string, eventId: string) => string,
): boolean {
  const seen = new Set<string>();
  let current: OutcomeRow | undefined = row;
  while (current?.outcome === 'collapsed' && current.collapsedInto !== null && !seen.has(current.eventId)) {
    seen.add(current.eventId);
    current = byRoute.get(key(row.webhookId, current.collapsedInto));
  }
  if (current === undefined) return false;
  if (current.outcome === 'excluded') return current.excludedBy !== null;
  return current.outcome === 'delivered' && received.has(key(row.webhookId, current.eventId));
}

/**
 * The events captured against the changes committed: per asset and event
 * type, how many committed changes have no event (lost at capture) and how
 * many events no committed change explains.
 */
export function compareCapture(
  committed: ReadonlyArray<{ assetId: number; eventType: string }>,
  captured: ReadonlyArray<{ assetId: number; eventType: string }>,
): { missing: number; unexplained: number } {
  const counts = new Map<string, number>();
  for (const change of committed) {
    const k = `${change.assetId}:${change.eventType}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  for (const event of captured) {
    const k = `${event.assetId}:${event.eventType}`;
    counts.set(k, (counts.get(k) ?? 0) - 1);
  }
  let missing = 0;
  let unexplained = 0;
  for (const n of counts.values()) {
    if (n > 0) missing += n;
    else unexplained -= n;
  }
  return { missing, unexplained };
}
