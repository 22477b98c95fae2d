import type { FilterGroup } from '../config/schema.js';
import { EVENT_TYPES, type AssetState, type EventType } from '../interfaces.js';
import { compileWebhook, type CompiledWebhook, type WebhookChecks } from './compile.js';

/**
 * The webhooks an event could reach, found without asking every webhook.
 *
 * A webhook delivers an event only if every one of its checks passes, so any
 * check that needs a value to be present partitions the webhooks by that
 * value: an `ANY` group passes only when the asset has one of its listed
 * values, an `AND` group only when it has each of them (so, in particular,
 * the first). Each enabled webhook is filed under the values of one such group
 * (the one with the fewest keys); a webhook without one is filed by the checks
 * before the filters (event type, resource type, top-level). An event looks up
 * the asset's own values, and the webhooks found are then evaluated in full by
 * their compiled checks (compile.ts), in their order: the index only
 * leaves out webhooks whose verdict could not be `deliver`, it decides no
 * verdict itself. Which check excluded an event from a webhook left out is
 * derived when someone asks, from what routing saw (see src/coalesce/seen.ts).
 *
 * The values are compared as the compiled checks compare them
 * (src/filters/compile.ts): exact strings; numbers as their decimal string, so a
 * listed value such as `007` is filed under a key no asset has.
 */
export class RoutingIndex {
  /** Evaluations of compiled checks so far (what the index saves is the rest). */
  evaluations = 0;
  private readonly compiled: readonly CompiledWebhook[];
  private readonly enabled: readonly number[];
  private readonly eventTypes: ReadonlyArray<ReadonlySet<string>>;
  private readonly resourceTypes: ReadonlyArray<ReadonlySet<string>>;
  private readonly topLevelOnly: readonly boolean[];
  /** Keyed webhooks by the value their key group needs. */
  private readonly byKeyword = new Map<string, number[]>();
  private readonly byFieldValue = new Map<string, number[]>();
  /** fieldName, then value. */
  private readonly byNamedField = new Map<string, Map<string, number[]>>();
  private readonly byState = new Map<string, number[]>();
  private readonly bySchemaId = new Map<string, number[]>();
  private readonly byTypeId = new Map<string, number[]>();
  private readonly byDomainId = new Map<string, number[]>();
  /** Decimal string, or `null` for a top-level asset. */
  private readonly byParentId = new Map<string, number[]>();
  private readonly unkeyed: readonly number[];
  /** The unkeyed webhooks that pass the checks before the filters: by top-level and event type, then supertype. */
  private readonly unkeyedBy: ReadonlyArray<Map<string, number[]>> = Array.from(
    { length: EVENT_TYPES.length * 2 },
    () => new Map(),
  );
  /** Per webhook, the stamp of the last event that found it (each is evaluated once per event). */
  private readonly seen: Uint32Array;
  private stamp = 0;
  private readonly found: number[] = [];

  constructor(webhooks: readonly WebhookChecks[]) {
    this.compiled = webhooks.map(compileWebhook);
    this.eventTypes = webhooks.map((webhook) => new Set<string>(webhook.eventTypes));
    this.resourceTypes = webhooks.map((webhook) => new Set(webhook.resourceTypes));
    this.topLevelOnly = webhooks.map((webhook) => !webhook.filters.some((group) => group.filterKind === 'parentId'));
    this.seen = new Uint32Array(webhooks.length);
    const enabled: number[] = [];
    const unkeyed: number[] = [];
    webhooks.forEach((webhook, index) => {
      if (!webhook.enabled) return;
      enabled.push(index);
      const key = keyGroup(webhook.filters);
      if (key === null) unkeyed.push(index);
      else for (const value of key.values) file(this.postingsOf(key.group), value, index);
    });
    this.enabled = enabled;
    this.unkeyed = unkeyed;
  }

  /** How many webhooks the index holds. */
  get size(): number {
    return this.compiled.length;
  }

  /** How many of them are enabled. */
  get enabledCount(): number {
    return this.enabled.length;
  }

  /**
   * The webhooks (positions in the constructor's list) that deliver this
   * event: exactly those whose compiled checks return null, and for PURGED
   * every enabled webhook. `asset` null (gone by coalescing time) reaches none
   * but PURGED. The array is reused by the next call.
   */
  deliveringTo(eventType: EventType, asset: AssetState | null): readonly number[] {
    const found = this.found;
    found.length = 0;
    if (eventType === 'PURGED') {
      for (let i = 0; i < this.enabled.length; i += 1) found.push(this.enabled[i]!);
      return found;
    }
    if (asset === null) return found;
    this.stamp = (this.stamp + 1) >>> 0;
    if (this.stamp === 0) {
      this.seen.fill(0);
      this.stamp = 1;
    }
    const topLevel = asset.parentId === null;
    this.consider(this.unkeyedFor(eventType, asset.supertype, topLevel), eventType, asset);
    if (this.byKeyword.size > 0)
      for (const keyword of asset.keywords) this.consider(this.byKeyword.get(keyword), eventType, asset);
    if (this.byFieldValue.size > 0)
      for (const value of asset.fieldValues) this.consider(this.byFieldValue.get(value), eventType, asset);
    if (this.byNamedField.size > 0) {
      for (let i = 0; i < asset.fieldNames.length; i += 1) {
        this.consider(this.byNamedField.get(asset.fieldNames[i]!)?.get(asset.fieldValues[i]!), eventType, asset);
      }
    }
    if (asset.state !== null && this.byState.size > 0) this.consider(this.byState.get(asset.state), eventType, asset);
    if (asset.schemaId !== null && this.bySchemaId.size > 0)
      this.consider(this.bySchemaId.get(String(asset.schemaId)), eventType, asset);
    if (asset.typeId !== null && this.byTypeId.size > 0)
      this.consider(this.byTypeId.get(String(asset.typeId)), eventType, asset);
    if (asset.domainId !== null && this.byDomainId.size > 0)
      this.consider(this.byDomainId.get(String(asset.domainId)), eventType, asset);
    if (this.byParentId.size > 0)
      this.consider(this.byParentId.get(topLevel ? 'null' : String(asset.parentId)), eventType, asset);
    return found;
  }

  /** Evaluates each webhook of `list` not yet evaluated for this event; those that deliver are added to `found`. */
  private consider(list: readonly number[] | undefined, eventType: EventType, asset: AssetState): void {
    if (list === undefined) return;
    for (let i = 0; i < list.length; i += 1) {
      const index = list[i]!;
      if (this.seen[index] === this.stamp) continue;
      this.seen[index] = this.stamp;
      // The checks before the filters, asked here so that a keyed webhook of
      // another event type or supertype costs no evaluation.
      if (!this.eventTypes[index]!.has(eventType) || !this.resourceTypes[index]!.has(asset.supertype)) continue;
      if (this.topLevelOnly[index] && asset.parentId !== null) continue;
      this.evaluations += 1;
      if (this.compiled[index]!.evaluate(eventType, asset) === null) this.found.push(index);
    }
  }

  private unkeyedFor(eventType: EventType, supertype: string, topLevel: boolean): readonly number[] {
    if (this.unkeyed.length === 0) return this.unkeyed;
    const bySupertype = this.unkeyedBy[EVENT_TYPES.indexOf(eventType) * 2 + (topLevel ? 1 : 0)]!;
    let list = bySupertype.get(supertype);
    if (list === undefined) {
      list = this.unkeyed.filter(
        (index) =>
          this.eventTypes[index]!.has(eventType) &&
          this.resourceTypes[index]!.has(supertype) &&
          (topLevel || !this.topLevelOnly[index]),
      );
      bySupertype.set(supertype, list);
    }
    return list;
  }

  private postingsOf(group: FilterGroup): Map<string, number[]> {
    switch (group.filterKind) {
      case 'keywords':
        return this.byKeyword;
      case 'additionalFields': {
        if (group.fieldName === undefined) return this.byFieldValue;
        let named = this.byNamedField.get(group.fieldName);
        if (named === undefined) this.byNamedField.set(group.fieldName, (named = new Map()));
        return named;
      }
      case 'state':
        return this.byState;
      case 'schemaId':
        return this.bySchemaId;
      case 'typeId':
        return this.byTypeId;
      case 'domainId':
        return this.byDomainId;
      case 'parentId':
        return this.byParentId;
    }
  }
}

function file(postings: Map<string, number[]>, value: string, index: number): void {
  const list = postings.get(value);
  if (list === undefined) postings.set(value, [index]);
  else if (list[list.length - 1] !== index) list.push(index);
}

/** Kinds with at most one value per asset: AND of two distinct values never passes. */
const SINGLE_VALUED: ReadonlySet<string> = new Set(['state', 'schemaId', 'typeId', 'domainId', 'parentId']);

/**
 * The group a webhook is filed under, with the values that file it: the ANY
 * or AND group with the fewest such values (an AND group needs only one of
 * its values to be found: the rest must be present as well). No values means
 * the group can never pass, and the webhook is found by no event. null when
 * the webhook has no ANY or AND group.
 */
function keyGroup(filters: readonly FilterGroup[]): { group: FilterGroup; values: readonly string[] } | null {
  let best: { group: FilterGroup; values: readonly string[] } | null = null;
  for (const group of filters) {
    if (group.condition === 'NONE') continue;
    const distinct = [...new Set(group.value)];
    let values: string[];
    if (group.condition === 'ANY') values = distinct;
    else if (SINGLE_VALUED.has(group.filterKind)) values = distinct.length === 1 ? distinct : [];
    else values = [distinct[0]!];
    if (best === null || values.length < best.values.length) best = { group, values };
  }
  return best;
}
