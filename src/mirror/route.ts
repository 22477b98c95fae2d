import type { ClaimedEvent, FeatureRead } from '../coalesce/claim.js';
import type { FeatureEvent, RoutingFeature, RoutingFeatureKind } from '../coalesce/routing-feature.js';
import type { Params } from '../db/columns.js';
import { compileWebhook, type CompiledWebhook, type WebhookChecks } from '../filters/compile.js';
import type { AssetState, ExclusionCheck } from '../interfaces.js';
import { serializeEvent } from '../payloads/serialize.js';
import { MEMBERSHIP_COLUMNS, memberUpsert, MirrorMembers, type MembershipRow } from './members.js';

/** What mirror routing needs of a configured webhook. */
export interface MirrorWebhook extends WebhookChecks {
  readonly id: string;
  readonly mirror?: boolean;
}

/** The mirror webhooks as a routing feature of coalescing: see MirrorRouting. */
export const mirrorFeature: RoutingFeatureKind = { of: (webhooks) => MirrorRouting.of(webhooks) };

/** The claim reads each asset's row of asset_webhooks.mirror_members with the chunk (MembershipRow). */
const MEMBERSHIP_READ: FeatureRead = {
  columns: MEMBERSHIP_COLUMNS,
  join: 'left join asset_webhooks.mirror_members m on m.asset_id = c.asset_id',
};

/** The membership a claimed row carries: the claim read MEMBERSHIP_READ into it. */
function membershipOf(row: ClaimedEvent): MembershipRow | null {
  return row.featureColumns as MembershipRow | null;
}

/**
 * Whether an asset is in a mirror webhook's set: it passes the webhook's
 * checks as an EDITED of it would (resource type, parent, filters: a mirror
 * webhook always takes EDITED), whatever the event's own type. null: it
 * passes; else the check that leaves it out.
 */
export function leavingCheck(compiled: CompiledWebhook, asset: AssetState): ExclusionCheck | null {
  return compiled.evaluate('EDITED', asset);
}

/**
 * The mirror webhooks' part of routing a coalescing chunk (docs/mirror.md).
 * For each enabled mirror webhook and each event:
 *  - routed to it: the asset enters its set (leaves it for PURGED);
 *  - not routed to it, of an asset in its set that now fails its resource
 *    type, parent or filter checks: it gets the event as an UNMATCHED instead,
 *    and the asset leaves its set;
 *  - otherwise nothing.
 * Every event it sends carries an eventTimestamp after the last one sent to
 * that webhook for that asset (raised by a millisecond where needed), so a
 * receiver can keep the latest per asset whatever order payloads arrive in.
 * The coalescer has raised it already, for every webhook (AssetClock, which
 * reads the membership's last time too); a reconcile relies on this class.
 */
export class MirrorRouting implements RoutingFeature {
  readonly members = new MirrorMembers();
  readonly read = MEMBERSHIP_READ;
  /** Per routing position: the index among the mirror webhooks, or -1. */
  private readonly slotOf: Int32Array;
  private readonly positions: readonly number[];
  private readonly ids: readonly string[];
  private readonly compiled: readonly CompiledWebhook[];
  /** The event being routed (see begin), its own time, and the eventTimestamp the mirror webhooks get. */
  private event: FeatureEvent | null = null;
  private ownMs = 0;
  private atMs = 0;
  private raised: string | null = null;

  private constructor(webhooks: readonly MirrorWebhook[], mirrors: readonly number[]) {
    this.slotOf = new Int32Array(webhooks.length).fill(-1);
    mirrors.forEach((position, slot) => (this.slotOf[position] = slot));
    this.positions = mirrors;
    this.ids = mirrors.map((position) => webhooks[position]!.id);
    this.compiled = mirrors.map((position) => compileWebhook(webhooks[position]!));
  }

  /** null when no enabled webhook is a mirror one: routing then does exactly what it did without mirrors. */
  static of(webhooks: readonly MirrorWebhook[]): MirrorRouting | null {
    const mirrors = webhooks.flatMap((webhook, position) =>
      webhook.enabled && webhook.mirror === true ? [position] : [],
    );
    return mirrors.length === 0 ? null : new MirrorRouting(webhooks, mirrors);
  }

  isMirror(position: number): boolean {
    return this.slotOf[position]! >= 0;
  }

  /** Takes the membership of a chunk's assets, as the claim read it (see MirrorMembers.absorb). */
  absorb(rows: readonly ClaimedEvent[]): void {
    this.members.absorb(rows.map((row) => ({ assetId: row.assetId, row: membershipOf(row) })));
  }

  /** The last eventTimestamp sent for the row's asset to any mirror webhook, as the claim read it. */
  lastSentMs(row: ClaimedEvent): number | null {
    const ms = membershipOf(row)?.mirror_last_ms;
    return ms == null ? null : Number(ms);
  }

  /** The chunk's membership changes, written with it. */
  chunkWrite(params: Params): string | null {
    const changes = this.members.takeChanges();
    return changes.length === 0 ? null : memberUpsert(params, changes);
  }

  /**
   * Starts routing `event`: every mirror webhook that gets anything of it
   * gets the same eventTimestamp, its own time or, if that is not after the
   * last one sent for the asset, a millisecond after that one.
   */
  begin(event: FeatureEvent): void {
    this.event = event;
    this.ownMs = Date.parse(event.eventTimestamp);
    this.atMs = this.members.nextMs(event.assetId, this.ownMs);
    this.raised = null;
  }

  /**
   * The JSON of the event for the webhook at `position`, which receives it
   * (`json` is its JSON as every other webhook gets it); for a mirror
   * webhook, the asset's new membership recorded.
   */
  delivered(position: number, json: string): string {
    if (!this.isMirror(position)) return json;
    const event = this.event!;
    // The PURGED of an asset never sent to a mirror webhook: nothing to remember (its id never comes back).
    if (event.eventType === 'PURGED' && this.members.get(event.assetId).lastMs === -Infinity) return json;
    this.members.record(
      event.assetId,
      event.assetUuid || null,
      this.ids[this.slotOf[position]!]!,
      event.eventType !== 'PURGED',
      this.atMs,
    );
    if (this.atMs === this.ownMs) return json;
    this.raised ??= serializeEvent({ ...event, eventTimestamp: new Date(this.atMs).toISOString() });
    return this.raised;
  }

  /**
   * Calls `send(position, json)` for each mirror webhook not in `receivers`
   * whose set holds the asset of the event while the asset no longer passes
   * its checks, with the UNMATCHED it gets, and records that the asset left
   * the set. An asset gone by now is left to its PURGED.
   */
  unmatchedFor(receivers: readonly number[], send: (position: number, json: string) => void): void {
    const event = this.event!;
    const asset = event.asset;
    if (asset === null || event.eventType === 'PURGED') return;
    let json: string | null = null;
    for (let slot = 0; slot < this.positions.length; slot += 1) {
      const position = this.positions[slot]!;
      if (receivers.includes(position)) continue;
      const id = this.ids[slot]!;
      if (!this.members.isMember(id, event.assetId) || leavingCheck(this.compiled[slot]!, asset) === null) continue;
      this.members.record(event.assetId, event.assetUuid || null, id, false, this.atMs);
      json ??= serializeEvent({
        ...event,
        eventType: 'UNMATCHED',
        // The asset's current atom, whatever the event's type.
        atomId: asset.latestAtomId ?? event.atomId,
        eventTimestamp: new Date(this.atMs).toISOString(),
      });
      send(position, json);
    }
  }
}
