import type { FilterGroup, WebhookConfig } from '../config/schema.js';
import type { AssetState, DecimalId, EventType, ExclusionCheck } from '../interfaces.js';
import { assetValues } from './asset-values.js';
import { groupPasses, hasParentIdFilter } from './reference.js';

/** One check's verdict with the values it compared, for operators. */
export interface CheckVerdict {
  /** The check, named as in event_outcomes.excluded_by; `purged_bypass` is the PURGED rule. */
  readonly check: ExclusionCheck | 'purged_bypass';
  /** pass, fail, or skipped (an earlier check decided). */
  readonly verdict: 'pass' | 'fail' | 'skipped';
  /** What was compared, in words. */
  readonly detail: string;
}

export interface Explanation {
  readonly webhookId: string;
  readonly eventType: EventType;
  readonly assetId: DecimalId;
  readonly delivered: boolean;
  /** The check that excluded the event, or null when it is delivered. */
  readonly excludedBy: ExclusionCheck | null;
  /** Every check in the spec's order, those after the deciding one marked skipped. */
  readonly checks: readonly CheckVerdict[];
}

/**
 * Every check, in the spec's order, with its verdict and the values
 * it compared, for `explain`. Its conclusion (excludedBy) equals
 * referenceEvaluate's; a property test checks that. `inTrash`: the asset is
 * in the Trash (the view's in_trash), so an EDITED or REVERSION of it is
 * excluded as `in_trash` for every webhook; the check is listed only then.
 */
export function explainWebhook(
  webhook: WebhookConfig,
  eventType: EventType,
  asset: AssetState,
  inTrash = false,
): Explanation {
  const checks: CheckVerdict[] = [];
  let excludedBy: ExclusionCheck | null = null;
  let purgedBypass = false;
  const record = (check: ExclusionCheck, passed: boolean, detail: string): void => {
    if (excludedBy !== null) {
      checks.push({ check, verdict: 'skipped', detail });
    } else if (purgedBypass) {
      checks.push({ check, verdict: 'skipped', detail: `${detail} (skipped: PURGED)` });
    } else {
      checks.push({ check, verdict: passed ? 'pass' : 'fail', detail });
      if (!passed) excludedBy = check;
    }
  };

  record(
    'disabled',
    webhook.enabled,
    webhook.enabled ? 'the webhook is enabled' : 'the webhook is disabled: it receives nothing, PURGED included',
  );
  if (eventType === 'PURGED' && excludedBy === null) {
    checks.push({
      check: 'purged_bypass',
      verdict: 'pass',
      detail: 'PURGED passes every check and is always delivered',
    });
    purgedBypass = true;
  }
  if (inTrash) {
    const edit = eventType === 'EDITED' || eventType === 'REVERSION';
    record(
      'in_trash',
      !edit,
      edit
        ? `the asset is in the Trash: a change to it is no ${eventType} for any webhook (its restore sends EDITED)`
        : `the asset is in the Trash; only EDITED and REVERSION are excluded for it`,
    );
  }

  const typeOk = webhook.resourceTypes.includes(asset.supertype);
  record(
    'resource_type',
    typeOk,
    `supertype ${JSON.stringify(asset.supertype)} ${typeOk ? 'is' : 'is not'} in resourceTypes [${webhook.resourceTypes.join(', ')}]`,
  );

  const eventOk = webhook.eventTypes.includes(eventType);
  record(
    'event_type',
    eventOk,
    `${eventType} ${eventOk ? 'is' : 'is not'} in eventTypes [${webhook.eventTypes.join(', ')}]`,
  );

  const parentFilter = hasParentIdFilter(webhook);
  record(
    'parent',
    parentFilter || asset.parentId === null,
    parentFilter
      ? 'a parentId filter is configured: it replaces the top-level-only default'
      : asset.parentId === null
        ? 'the asset is top-level (parentId null)'
        : `the asset is a child (parentId ${asset.parentId}); only top-level assets pass without a parentId filter`,
  );

  webhook.filters.forEach((group, index) => {
    record(`filter:${index + 1}`, groupPasses(group, asset), describeGroup(group, asset));
  });

  return {
    webhookId: webhook.id,
    eventType,
    assetId: asset.assetId,
    delivered: excludedBy === null,
    excludedBy,
    checks,
  };
}

/** `keywords ANY [summer, winter]: the asset has [summer], matching [summer]: at least one is present`. */
function describeGroup(group: FilterGroup, asset: AssetState): string {
  const values = assetValues(asset, group.filterKind, group.fieldName);
  const distinct = [...new Set(group.value)];
  const present = distinct.filter((value) => values.includes(value));
  const missing = distinct.filter((value) => !values.includes(value));
  const field =
    group.filterKind === 'additionalFields' && group.fieldName !== undefined
      ? `additionalFields[${group.fieldName}]`
      : group.filterKind;
  const has = values.length === 0 ? 'the asset has no value' : `the asset has [${values.join(', ')}]`;
  const matching = present.length > 0 ? `matching [${present.join(', ')}]` : 'matching none';
  const rule = {
    AND:
      missing.length === 0
        ? 'every listed value is present'
        : `AND needs every listed value, missing [${missing.join(', ')}]`,
    ANY:
      present.length > 0
        ? 'at least one listed value is present'
        : 'ANY needs at least one listed value, none is present',
    NONE: present.length === 0 ? 'no listed value is present' : 'NONE allows no listed value, but some are present',
  }[group.condition];
  return `${field} ${group.condition} [${group.value.join(', ')}]: ${has}, ${matching}: ${rule}`;
}
