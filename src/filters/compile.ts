import type { FilterGroup, WebhookConfig } from '../config/schema.js';
import type { AssetState, EventType, ExclusionCheck } from '../interfaces.js';

/** A webhook's checks compiled once, evaluated for every event. */
export interface CompiledWebhook {
  /**
   * The spec's checks in order (section 4.2), for an event of an existing
   * asset: null when the event is delivered, else the check that excluded it.
   */
  evaluate(eventType: EventType, asset: AssetState): ExclusionCheck | null;
}

type GroupTest = (asset: AssetState) => boolean;

/**
 * Compiles a webhook's configuration into a predicate built from Sets, with no
 * allocation per event: it runs for every event times every webhook.
 *
 * Order: a disabled webhook excludes everything (`disabled`, PURGED too);
 * PURGED passes; `resource_type`; `event_type`; `parent` (only top-level
 * assets, unless a parentId filter is configured); then each filter group,
 * `filter:<n>` counting from 1.
 */
export function compileWebhook(webhook: WebhookConfig): CompiledWebhook {
  const resourceTypes = new Set(webhook.resourceTypes);
  const eventTypes = webhook.eventTypes === undefined ? null : new Set<EventType>(webhook.eventTypes);
  const topLevelOnly = !webhook.filters.some((group) => group.filterKind === 'parentId');
  const groups = webhook.filters.map(compileGroup);
  const names = groups.map((_, index) => `filter:${index + 1}` as const);
  const enabled = webhook.enabled;
  return {
    evaluate(eventType, asset) {
      if (!enabled) return 'disabled';
      if (eventType === 'PURGED') return null;
      if (!resourceTypes.has(asset.supertype)) return 'resource_type';
      if (eventTypes !== null && !eventTypes.has(eventType)) return 'event_type';
      if (topLevelOnly && asset.parentId !== null) return 'parent';
      for (let index = 0; index < groups.length; index += 1) {
        if (!groups[index]!(asset)) return names[index]!;
      }
      return null;
    },
  };
}

/** One filter group as a predicate. A value list is a set; matching is exact and case-sensitive. */
function compileGroup(group: FilterGroup): GroupTest {
  const wanted = new Set(group.value);
  const values = valuesReader(group);
  switch (group.condition) {
    case 'ANY':
      return (asset) => countMatches(values(asset), wanted, group, asset) > 0;
    case 'NONE':
      return (asset) => countMatches(values(asset), wanted, group, asset) === 0;
    case 'AND':
      return (asset) => distinctMatches(values(asset), wanted, group, asset) === wanted.size;
  }
}

/**
 * Reads the asset's values for the group without allocating: lists are
 * returned as they are; single values as a reused one-element array.
 */
function valuesReader(group: FilterGroup): (asset: AssetState) => readonly string[] {
  const one: string[] = [''];
  const none: readonly string[] = [];
  const single = (value: string | number | null): readonly string[] => {
    if (value === null) return none;
    one[0] = typeof value === 'string' ? value : String(value);
    return one;
  };
  switch (group.filterKind) {
    case 'keywords':
      return (asset) => asset.keywords;
    case 'additionalFields':
      // The field name is applied while matching (see inField).
      return (asset) => asset.fieldValues;
    case 'state':
      return (asset) => single(asset.state);
    case 'schemaId':
      return (asset) => single(asset.schemaId);
    case 'typeId':
      return (asset) => single(asset.typeId);
    case 'domainId':
      return (asset) => single(asset.domainId);
    case 'parentId':
      return (asset) => single(asset.parentId === null ? 'null' : asset.parentId);
  }
}

function inField(group: FilterGroup, asset: AssetState, index: number): boolean {
  return group.fieldName === undefined || group.filterKind !== 'additionalFields' || asset.fieldNames[index] === group.fieldName;
}

function countMatches(values: readonly string[], wanted: ReadonlySet<string>, group: FilterGroup, asset: AssetState): number {
  let matches = 0;
  for (let index = 0; index < values.length; index += 1) {
    if (wanted.has(values[index]!) && inField(group, asset, index)) matches += 1;
  }
  return matches;
}

/** How many of the wanted values are present (each counted once, whatever its repetitions). */
function distinctMatches(values: readonly string[], wanted: ReadonlySet<string>, group: FilterGroup, asset: AssetState): number {
  let present = 0;
  for (const value of wanted) {
    for (let index = 0; index < values.length; index += 1) {
      if (values[index] === value && inField(group, asset, index)) {
        present += 1;
        break;
      }
    }
  }
  return present;
}
