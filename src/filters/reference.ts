import type { FilterGroup } from '../config/schema.js';
import type { AssetState, EventType, ExclusionCheck } from '../interfaces.js';
import { assetValues } from './asset-values.js';
import type { WebhookChecks } from './compile.js';

/**
 * The spec's checks, in its order, written as plainly as they read, with the
 * semantics docs/configuration.md (filter groups) states where the spec is
 * silent. It allocates
 * freely and is not used on the delivery path: it is the yardstick the
 * compiled predicate (compile.ts) and the explanation (explain.ts) are tested
 * against.
 */
export function referenceEvaluate(
  webhook: WebhookChecks,
  eventType: EventType,
  asset: AssetState,
): ExclusionCheck | null {
  if (!webhook.enabled) return 'disabled';
  if (eventType === 'PURGED') return null;
  if (!webhook.resourceTypes.includes(asset.supertype)) return 'resource_type';
  if (!webhook.eventTypes.includes(eventType)) return 'event_type';
  if (!hasParentIdFilter(webhook) && asset.parentId !== null) return 'parent';
  for (let index = 0; index < webhook.filters.length; index += 1) {
    if (!groupPasses(webhook.filters[index]!, asset)) return `filter:${index + 1}`;
  }
  return null;
}

/** A configured parentId filter (any condition) replaces the top-level-only check. */
export function hasParentIdFilter(webhook: WebhookChecks): boolean {
  return webhook.filters.some((group) => group.filterKind === 'parentId');
}

/** AND: every listed value is present; ANY: at least one; NONE: none. Exact, case-sensitive. */
export function groupPasses(group: FilterGroup, asset: AssetState): boolean {
  const values = assetValues(asset, group.filterKind, group.fieldName);
  const present = (value: string): boolean => values.includes(value);
  switch (group.condition) {
    case 'AND':
      return group.value.every(present);
    case 'ANY':
      return group.value.some(present);
    case 'NONE':
      return !group.value.some(present);
  }
}
