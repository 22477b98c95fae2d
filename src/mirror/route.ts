import { compileWebhook, type CompiledWebhook, type WebhookChecks } from '../filters/compile.js';
import type { AssetState, DecimalId, EventType, ExclusionCheck } from '../interfaces.js';
import { serializeEvent } from '../payloads/serialize.js';
import { MirrorMembers } from './members.js';

/** What mirror routing needs of a configured webhook. */
export interface MirrorWebhook extends WebhookChecks {
  readonly id: string;
  readonly mirror?: boolean;
}

/** An event as mirror routing sees it (one claimed outbox row, resolved). */
export interface MirrorEvent {
  readonly eventId: string;
  readonly eventType: EventType;
  /** The event's own eventTimestamp, ISO with milliseconds. */
  readonly eventTimestamp: string;
  readonly assetId: DecimalId;
  readonly assetUuid: string;
  /** As delivered (the latest atom for EDITED). */
  readonly atomId: DecimalId | null;
  /** The asset's state at routing time; null when gone. */
  readonly asset: AssetState | null;
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
export class MirrorRouting {
  readonly members = new MirrorMembers();
  /** Per routing position: the index among the mirror webhooks, or -1. */
  private readonly slotOf: Int32Array;
  private readonly positions: readonly number[];
  private readonly ids: readonly string[];
  private readonly compiled: readonly CompiledWebhook[];
  /** The event being routed (see begin), its own time, and the eventTimestamp the mirror webhooks get. */
  private event: MirrorEvent | null = null;
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

  /**
   * Starts routing `event`: every mirror webhook that gets anything of it
   * gets the same eventTimestamp, its own time or, if that is not after the
   * last one sent for the asset, a millisecond after that one.
   */
  begin(event: MirrorEvent): void {
    this.event = event;
    this.ownMs = Date.parse(event.eventTimestamp);
    this.atMs = this.members.nextMs(event.assetId, this.ownMs);
    this.raised = null;
  }

  /**
   * The JSON of the event for the mirror webhook at `position`, which
   * receives it (`json` is its JSON as every other webhook gets it), and the
   * asset's new membership recorded.
   */
  delivered(position: number, json: string): string {
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
