import type { FilterGroup, WebhookConfig } from '../config/schema.js';
import type { AssetState, DecimalId, EventType, ExclusionCheck } from '../interfaces.js';

/** What the checks read of a webhook's configuration. */
export type WebhookChecks = Pick<WebhookConfig, 'enabled' | 'resourceTypes' | 'eventTypes' | 'filters'>;

/** A webhook's checks compiled once, evaluated for every event. */
export interface CompiledWebhook {
  /**
   * The spec's checks in its order, for an event of an existing
   * asset: null when the event is delivered, else the check that excluded it.
   */
  evaluate(eventType: EventType, asset: AssetState): ExclusionCheck | null;
}

type AssetTest = (asset: AssetState) => boolean;

/**
 * Compiles a webhook's configuration into a predicate that runs for every
 * event times every webhook, so it is built once from Sets and allocates
 * nothing per event: no strings (ids arrive as decimal text), no arrays, no
 * closures.
 *
 * Order: a disabled webhook excludes everything (`disabled`, PURGED too);
 * PURGED passes; `resource_type`; `event_type`; `parent` (only top-level
 * assets, unless a parentId filter is configured); then each filter group,
 * `filter:<n>` counting from 1.
 *
 * It must agree with referenceEvaluate (reference.ts) on every input; a
 * property test checks that.
 */
export function compileWebhook(webhook: WebhookChecks): CompiledWebhook {
  const enabled = webhook.enabled;
  const resourceTypes = new Set(webhook.resourceTypes);
  const eventTypes = new Set<EventType>(webhook.eventTypes);
  const topLevelOnly = !webhook.filters.some((group) => group.filterKind === 'parentId');
  const groups: readonly AssetTest[] = webhook.filters.map(compileGroup);
  const names: readonly ExclusionCheck[] = groups.map((_, index) => `filter:${index + 1}` as const);
  return {
    evaluate(eventType, asset) {
      if (!enabled) return 'disabled';
      if (eventType === 'PURGED') return null;
      if (!resourceTypes.has(asset.supertype)) return 'resource_type';
      if (!eventTypes.has(eventType)) return 'event_type';
      if (topLevelOnly && asset.parentId !== null) return 'parent';
      for (let index = 0; index < groups.length; index += 1) {
        if (!groups[index]!(asset)) return names[index]!;
      }
      return null;
    },
  };
}

/**
 * How a group asks the asset: `any` = at least one listed value is present,
 * `all` = every listed value is present. NONE is `not any`.
 */
interface Presence {
  readonly any: AssetTest;
  readonly all: AssetTest;
}

function compileGroup(group: FilterGroup): AssetTest {
  const presence = compilePresence(group);
  switch (group.condition) {
    case 'ANY':
      return presence.any;
    case 'AND':
      return presence.all;
    case 'NONE': {
      const any = presence.any;
      return (asset) => !any(asset);
    }
  }
}

function compilePresence(group: FilterGroup): Presence {
  switch (group.filterKind) {
    case 'keywords':
      return listPresence(group.value, (asset) => asset.keywords);
    case 'additionalFields':
      return group.fieldName === undefined
        ? listPresence(group.value, (asset) => asset.fieldValues)
        : namedFieldPresence(group.value, group.fieldName);
    case 'state':
      return singlePresence(group.value, (asset, wanted) => asset.state !== null && wanted.has(asset.state));
    case 'schemaId':
      return numberPresence(group.value, (asset) => asset.schemaId, false);
    case 'typeId':
      return numberPresence(group.value, (asset) => asset.typeId, false);
    case 'domainId':
      return numberPresence(group.value, (asset) => asset.domainId, false);
    case 'parentId':
      return numberPresence(group.value, (asset) => asset.parentId, true);
  }
}

/** A multi-valued field (keywords, additional-field values): the list is a set. */
function listPresence(listed: readonly string[], read: (asset: AssetState) => readonly string[]): Presence {
  const wanted = new Set(listed);
  const distinct = [...wanted];
  return {
    any: (asset) => {
      const values = read(asset);
      for (let index = 0; index < values.length; index += 1) {
        if (wanted.has(values[index]!)) return true;
      }
      return false;
    },
    all: (asset) => {
      const values = read(asset);
      for (let index = 0; index < distinct.length; index += 1) {
        if (!values.includes(distinct[index]!)) return false;
      }
      return true;
    },
  };
}

/** additionalFields with fieldName: only the values of fields of that name count. */
function namedFieldPresence(listed: readonly string[], fieldName: string): Presence {
  const wanted = new Set(listed);
  const distinct = [...wanted];
  const hasValue = (asset: AssetState, value: string): boolean => {
    for (let index = 0; index < asset.fieldValues.length; index += 1) {
      if (asset.fieldNames[index] === fieldName && asset.fieldValues[index] === value) return true;
    }
    return false;
  };
  return {
    any: (asset) => {
      for (let index = 0; index < asset.fieldValues.length; index += 1) {
        if (asset.fieldNames[index] === fieldName && wanted.has(asset.fieldValues[index]!)) return true;
      }
      return false;
    },
    all: (asset) => {
      for (let index = 0; index < distinct.length; index += 1) {
        if (!hasValue(asset, distinct[index]!)) return false;
      }
      return true;
    },
  };
}

/**
 * A single-valued field has at most one value, so AND can only pass when the
 * list names exactly one distinct value, and then AND is ANY.
 */
function singlePresence(
  listed: readonly string[],
  present: (asset: AssetState, wanted: ReadonlySet<string>) => boolean,
): Presence {
  const wanted = new Set(listed);
  const any: AssetTest = (asset) => present(asset, wanted);
  return { any, all: wanted.size === 1 ? any : () => false };
}

/**
 * schemaId, typeId, domainId, parentId: the asset's id, already decimal text
 * (DecimalId), against the listed digit strings, compared exactly as strings:
 * `012` never equals 12, and ids beyond 2^53 compare digit for digit. For
 * parentId the listed `null` matches a top-level asset; an absent
 * schemaId/typeId/domainId has no value.
 */
function numberPresence(
  listed: readonly string[],
  read: (asset: AssetState) => DecimalId | null,
  nullMatchesListedNull: boolean,
): Presence {
  const wantsNull = nullMatchesListedNull && listed.includes('null');
  return singlePresence(listed, (asset, wanted) => {
    const value = read(asset);
    return value === null ? wantsNull : wanted.has(value);
  });
}
