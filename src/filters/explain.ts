import type { WebhookConfig } from '../config/schema.js';
import type { AssetState, EventType, ExclusionCheck } from '../interfaces.js';
import { assetValues } from './asset-values.js';

/** One check's verdict with the values it compared, for operators. */
export interface CheckVerdict {
  readonly check: ExclusionCheck | 'purged_bypass';
  /** pass, fail, or skipped (an earlier check decided). */
  readonly verdict: 'pass' | 'fail' | 'skipped';
  readonly detail: string;
}

export interface Explanation {
  readonly webhookId: string;
  readonly eventType: EventType;
  readonly assetId: number;
  readonly delivered: boolean;
  /** The check that excluded the event, or null when it is delivered. */
  readonly excludedBy: ExclusionCheck | null;
  readonly checks: readonly CheckVerdict[];
}

/**
 * The plain, obviously correct form of the spec's checks (section 4.2 and
 * CONTRACT section 3), returning every verdict. The compiled predicate in
 * compile.ts must agree with it (a property test checks that).
 */
export function explainWebhook(webhook: WebhookConfig, eventType: EventType, asset: AssetState): Explanation {
  const checks: CheckVerdict[] = [];
  let excludedBy: ExclusionCheck | null = null;
  const record = (check: CheckVerdict['check'], passed: boolean, detail: string): void => {
    if (excludedBy !== null) {
      checks.push({ check, verdict: 'skipped', detail });
      return;
    }
    checks.push({ check, verdict: passed ? 'pass' : 'fail', detail });
    if (!passed && check !== 'purged_bypass') excludedBy = check;
  };

  record('disabled', webhook.enabled, webhook.enabled ? 'the webhook is enabled' : 'the webhook is disabled: it receives nothing, PURGED included');
  const bypass = eventType === 'PURGED';
  if (bypass && excludedBy === null) {
    checks.push({ check: 'purged_bypass', verdict: 'pass', detail: 'PURGED passes every check and is always delivered' });
  }
  const later = (check: CheckVerdict['check'], passed: boolean, detail: string): void => {
    if (bypass && excludedBy === null) checks.push({ check, verdict: 'skipped', detail: `${detail} (skipped: PURGED)` });
    else record(check, passed, detail);
  };

  later('resource_type', webhook.resourceTypes.includes(asset.supertype),
    `supertype ${JSON.stringify(asset.supertype)} ${webhook.resourceTypes.includes(asset.supertype) ? 'is' : 'is not'} in resourceTypes [${webhook.resourceTypes.join(', ')}]`);
  const typeOk = webhook.eventTypes === undefined || webhook.eventTypes.includes(eventType);
  later('event_type', typeOk, webhook.eventTypes === undefined
    ? 'eventTypes not set: all event types pass'
    : `${eventType} ${typeOk ? 'is' : 'is not'} in eventTypes [${webhook.eventTypes.join(', ')}]`);
  const parentFilter = webhook.filters.some((group) => group.filterKind === 'parentId');
  later('parent', parentFilter || asset.parentId === null, parentFilter
    ? 'a parentId filter is configured: it replaces the top-level-only default'
    : asset.parentId === null ? 'the asset is top-level (parentId null)' : `the asset is a child (parentId ${asset.parentId}); only top-level assets pass without a parentId filter`);

  webhook.filters.forEach((group, index) => {
    const values = assetValues(asset, group.filterKind, group.fieldName);
    // The value list is a set: a repeated value counts once.
    const wanted = [...new Set(group.value)];
    const present = wanted.filter((value) => values.includes(value));
    const passed = group.condition === 'ANY' ? present.length > 0 : group.condition === 'NONE' ? present.length === 0 : present.length === wanted.length;
    const field = group.filterKind === 'additionalFields' && group.fieldName !== undefined ? `additionalFields[${group.fieldName}]` : group.filterKind;
    later(`filter:${index + 1}`, passed,
      `${field} ${group.condition} [${group.value.join(', ')}]: the asset has [${values.join(', ')}]` +
        (present.length > 0 ? `, matching [${present.join(', ')}]` : ', matching none'));
  });

  return { webhookId: webhook.id, eventType, assetId: asset.assetId, delivered: excludedBy === null, excludedBy, checks };
}
