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
 */
export class MirrorRouting {
  readonly members: MirrorMembers;
  /** Events sent as UNMATCHED so far (metrics). */
  unmatched = 0;
  /** Per routing position: the index among the mirror webhooks, or -1. */
  private readonly slotOf: Int32Array;
  private readonly positions: readonly number[];
  private readonly ids: readonly string[];
  private readonly compiled: readonly CompiledWebhook[];

  private constructor(webhooks: readonly MirrorWebhook[], mirrors: readonly number[]) {
    this.slotOf = new Int32Array(webhooks.length).fill(-1);
    mirrors.forEach((position, slot) => (this.slotOf[position] = slot));
    this.positions = mirrors;
    this.ids = mirrors.map((position) => webhooks[position]!.id);
    this.compiled = mirrors.map((position) => compileWebhook(webhooks[position]!));
    this.members = new MirrorMembers(this.ids);
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
   * The JSON of `event` for the mirror webhook at `position`, which receives
   * it (`json` is its JSON as every other webhook gets it), and the asset's
   * new membership recorded.
   */
  delivered(position: number, event: MirrorEvent, eventMs: number, json: string): string {
    const slot = this.slotOf[position]!;
    const id = this.ids[slot]!;
    const { lastMs } = this.members.get(id, event.assetId);
    // The PURGED of an asset never sent to the webhook: nothing to remember (its id never comes back).
    if (event.eventType === 'PURGED' && lastMs === -Infinity) return json;
    const at = Math.max(eventMs, lastMs + 1);
    this.members.set({
      webhookId: id,
      assetId: event.assetId,
      assetUuid: event.assetUuid || null,
      member: event.eventType !== 'PURGED',
      lastMs: at,
    });
    return at === eventMs ? json : serializeEvent({ ...event, eventTimestamp: new Date(at).toISOString() });
  }

  /**
   * Calls `send(position, json)` for each mirror webhook not in `receivers`
   * whose set holds the asset of `event` while the asset no longer passes its
   * checks, with the UNMATCHED it gets, and records that the asset left the
   * set. An asset gone by now is left to its PURGED.
   */
  unmatchedFor(
    event: MirrorEvent,
    eventMs: number,
    receivers: readonly number[],
    send: (position: number, json: string) => void,
  ): void {
    const asset = event.asset;
    if (asset === null || event.eventType === 'PURGED') return;
    for (let slot = 0; slot < this.positions.length; slot += 1) {
      const position = this.positions[slot]!;
      if (receivers.includes(position)) continue;
      const id = this.ids[slot]!;
      const state = this.members.get(id, event.assetId);
      if (!state.member || leavingCheck(this.compiled[slot]!, asset) === null) continue;
      const at = Math.max(eventMs, state.lastMs + 1);
      this.members.set({
        webhookId: id,
        assetId: event.assetId,
        assetUuid: event.assetUuid || null,
        member: false,
        lastMs: at,
      });
      this.unmatched += 1;
      send(
        position,
        serializeEvent({
          ...event,
          eventType: 'UNMATCHED',
          // The asset's current atom, whatever the event's type.
          atomId: asset.latestAtomId ?? event.atomId,
          eventTimestamp: new Date(at).toISOString(),
        }),
      );
    }
  }
}
