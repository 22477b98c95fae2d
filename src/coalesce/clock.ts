import type pg from 'pg';
import type { DecimalId } from '../interfaces.js';
import type { ClaimedEvent } from './claim.js';
import { collapsedInto } from './collapse.js';
import type { RoutingFeature } from './routing-feature.js';

/**
 * Ordering: one asset's eventTimestamps strictly increase, for every webhook,
 * in the order its events are coalesced (the order its changes committed, as
 * far as the outbox tells). An event whose own time is not after the last
 * eventTimestamp given to its asset is raised to one millisecond after it:
 * one statement that sets a new version and trashes the asset gives REVERSION
 * and DELETED of the same millisecond, and a transaction held open commits
 * changes older than events already sent. Every webhook gets the same,
 * possibly raised, time, so each webhook's subsequence of the asset's events
 * strictly increases too, and a receiver keeps the latest state by applying an
 * event only when its eventTimestamp is greater than the one it holds.
 *
 * The last eventTimestamp of an asset is the latest asset_webhooks.events
 * row's occurred_at (stored as the eventTimestamp given: see stampChunk), read
 * with the chunk (ClaimedEvent.lastMs), or the last one a routing feature
 * knows was sent (RoutingFeature.lastSentMs: a mirror webhook's membership),
 * whichever is later. What a chunk reads misses the stamps of the two chunks
 * before it (a run reads chunk N+1 before it routes chunk N, while chunk N-1
 * may still be being written): they are laid over it, as a feature's absorb does.
 * Their writes must therefore commit in order, and a chunk's before the chunk
 * three after it is read.
 */
export class AssetClock {
  /**
   * The highest eventTimestamp given so far, stored or in this run (epoch
   * milliseconds; -1 when none): an event whose own time is after it is
   * never raised, so a chunk reads the stored times only of assets with a
   * row not after it (ClaimOptions.probeUpToMs). Read before the chunk before
   * the one it bounds is stamped, it covers every chunk committed by then;
   * the two after are laid over what the chunk reads.
   */
  watermark: number;
  private readonly known = new Map<DecimalId, number>();
  /** The stamps of the last two chunks, oldest first. */
  private previous: Array<Map<DecimalId, number>> = [];
  private current = new Map<DecimalId, number>();

  /** `lastStampMs`: the highest eventTimestamp stored when the run began (lastEventTimestamp). */
  constructor(lastStampMs: number | null) {
    this.watermark = lastStampMs ?? -1;
  }

  /** Takes the chunk's rows as read, then lays over them the stamps of the two chunks before. */
  absorb(rows: readonly ClaimedEvent[], features: readonly RoutingFeature[]): void {
    this.known.clear();
    for (const row of rows) {
      let read = row.lastMs ?? -Infinity;
      for (const feature of features) read = Math.max(read, feature.lastSentMs(row) ?? -Infinity);
      if (read !== -Infinity) this.known.set(row.assetId, read);
    }
    for (const stamps of this.previous) for (const [assetId, ms] of stamps) this.known.set(assetId, ms);
  }

  /** The eventTimestamp for the asset's next event of own time `ownMs`, recorded as the asset's last. */
  next(assetId: DecimalId, ownMs: number): number {
    const last = this.known.get(assetId);
    const at = last === undefined || ownMs > last ? ownMs : last + 1;
    this.known.set(assetId, at);
    this.current.set(assetId, at);
    if (at > this.watermark) this.watermark = at;
    return at;
  }

  /** Ends the chunk: its stamps are laid over what the next two chunks read. */
  endChunk(): void {
    this.previous = [this.previous.at(-1) ?? new Map<DecimalId, number>(), this.current];
    this.current = new Map<DecimalId, number>();
  }
}

/**
 * Gives the chunk's events their eventTimestamps, in order (see AssetClock):
 * every event but a collapsed EDITED (which is sent as the event it collapses
 * into) takes the asset's next time. Returns the rows, a raised one replaced
 * by a copy that carries its new time, and per row the raised time (ISO-8601
 * with milliseconds) or null where the own time stands.
 */
export function stampChunk(
  rows: readonly ClaimedEvent[],
  clock: AssetClock,
  features: readonly RoutingFeature[],
): { rows: ClaimedEvent[]; raised: Array<string | null> } {
  clock.absorb(rows, features);
  const stamped = new Array<ClaimedEvent>(rows.length);
  const raised = new Array<string | null>(rows.length);
  for (let i = 0; i < rows.length; i += 1) {
    const row = rows[i]!;
    stamped[i] = row;
    raised[i] = null;
    if (collapsedInto(row) !== null) continue;
    const ownMs = Date.parse(row.eventTimestamp);
    const at = clock.next(row.assetId, ownMs);
    if (at === ownMs) continue;
    const eventTimestamp = new Date(at).toISOString();
    stamped[i] = { ...row, eventTimestamp };
    raised[i] = eventTimestamp;
  }
  clock.endChunk();
  return { rows: stamped, raised };
}

/** The highest eventTimestamp stored in asset_webhooks.events, epoch milliseconds; null when none is (one probe of events_occurred_at). */
export async function lastEventTimestamp(client: pg.PoolClient): Promise<number | null> {
  const { rows } = await client.query<{ ms: string | null }>(
    'select floor(extract(epoch from max(occurred_at)) * 1000)::bigint::text as ms from asset_webhooks.events',
  );
  const ms = rows[0]?.ms ?? null;
  return ms === null ? null : Number(ms);
}
