import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { configSchema, type FilterGroup, type WebhookConfig } from '../../src/config/schema.js';
import { compileWebhook } from '../../src/filters/compile.js';
import { explainWebhook } from '../../src/filters/explain.js';
import { referenceEvaluate } from '../../src/filters/reference.js';
import { RoutingIndex } from '../../src/filters/routing-index.js';
import { EVENT_TYPES, type AssetState } from '../../src/interfaces.js';
import { assetArb, groupArb, webhookArb } from '../helpers/filter-arbitraries.js';

/** One group on a webhook that lets every asset reach the filters. */
function withOneGroup(group: unknown): WebhookConfig {
  const document = {
    url: 'https://receiver.example/hook',
    enabled: true,
    resourceTypes: ['Resource', 'Project', 'Template', 'resource'],
    filters: [group],
  };
  return configSchema.parse({ assetUpdater: { webhooks: [document] } }).assetUpdater.webhooks[0]!;
}

/** Whether the group passes, through the compiled predicate; the asset is made top-level so only the group decides. */
function passes(group: FilterGroup, asset: AssetState): boolean {
  const reachable = group.filterKind === 'parentId' ? asset : { ...asset, parentId: null };
  return compileWebhook(withOneGroup(group)).evaluate('EDITED', reachable) === null;
}

const groupOf =
  (condition: FilterGroup['condition']) =>
  (group: FilterGroup): FilterGroup => ({ ...group, condition });

describe('filter properties', () => {
  it('NONE(values) is exactly not ANY(values), for every filter kind', () => {
    fc.assert(
      fc.property(groupArb, assetArb, (group, asset) => {
        const parsed = withOneGroup(group).filters[0]!;
        expect(passes(groupOf('NONE')(parsed), asset)).toBe(!passes(groupOf('ANY')(parsed), asset));
      }),
      { numRuns: 2000 },
    );
  });

  it('AND of one value equals ANY of it, for every filter kind', () => {
    fc.assert(
      fc.property(groupArb, assetArb, (group, asset) => {
        const parsed = withOneGroup(group).filters[0]!;
        const one = { ...parsed, value: [parsed.value[0]!] };
        expect(passes(groupOf('AND')(one), asset)).toBe(passes(groupOf('ANY')(one), asset));
      }),
      { numRuns: 2000 },
    );
  });

  it('a value list is a set: repeating or reordering values changes nothing', () => {
    fc.assert(
      fc.property(groupArb, assetArb, (group, asset) => {
        const parsed = withOneGroup(group).filters[0]!;
        const shuffled = { ...parsed, value: [...parsed.value].reverse().concat(parsed.value) };
        expect(passes(shuffled, asset)).toBe(passes(parsed, asset));
      }),
      { numRuns: 1000 },
    );
  });

  it('the compiled predicate agrees with the plain reference evaluation', () => {
    fc.assert(
      fc.property(webhookArb, assetArb, fc.constantFrom(...EVENT_TYPES), (webhook, asset, eventType) => {
        expect(compileWebhook(webhook).evaluate(eventType, asset)).toBe(referenceEvaluate(webhook, eventType, asset));
      }),
      { numRuns: 5000 },
    );
  });

  it('explain reaches the reference verdict, failing exactly the deciding check and skipping the rest', () => {
    fc.assert(
      fc.property(webhookArb, assetArb, fc.constantFrom(...EVENT_TYPES), (webhook, asset, eventType) => {
        const explanation = explainWebhook(webhook, eventType, asset);
        const expected = referenceEvaluate(webhook, eventType, asset);
        expect(explanation.excludedBy).toBe(expected);
        expect(explanation.delivered).toBe(expected === null);
        const failed = explanation.checks.filter((check) => check.verdict === 'fail').map((check) => check.check);
        expect(failed).toEqual(expected === null ? [] : [expected]);
        const decided = explanation.checks.findIndex((check) => check.verdict === 'fail');
        if (decided >= 0)
          expect(explanation.checks.slice(decided + 1).every((check) => check.verdict === 'skipped')).toBe(true);
        expect(explanation.checks.filter((check) => check.check.startsWith('filter:'))).toHaveLength(
          webhook.filters.length,
        );
      }),
      { numRuns: 2000 },
    );
  });

  it('PURGED reaches every enabled webhook and no disabled one', () => {
    fc.assert(
      fc.property(webhookArb, assetArb, (webhook, asset) => {
        expect(compileWebhook(webhook).evaluate('PURGED', asset)).toBe(webhook.enabled ? null : 'disabled');
      }),
    );
  });

  it('the routing index delivers to exactly the webhooks whose checks all pass, and evaluates no other', () => {
    // Many webhooks sharing few values, so that keys collide, repeat and miss.
    fc.assert(
      fc.property(
        fc.array(webhookArb, { maxLength: 12 }),
        fc.option(assetArb, { nil: null }),
        fc.constantFrom(...EVENT_TYPES),
        (webhooks, asset, eventType) => {
          const index = new RoutingIndex(webhooks);
          const delivering = [...index.deliveringTo(eventType, asset)].sort((a, b) => a - b);
          const expected = webhooks.flatMap((webhook, position) => {
            if (!webhook.enabled) return [];
            if (eventType === 'PURGED') return [position];
            return asset !== null && referenceEvaluate(webhook, eventType, asset) === null ? [position] : [];
          });
          expect(delivering).toEqual(expected);
          expect(index.evaluations).toBeLessThanOrEqual(webhooks.length);
          // Every webhook the index left out is excluded, by the check the reference names.
          if (asset !== null && eventType !== 'PURGED') {
            webhooks.forEach((webhook, position) => {
              const verdict = compileWebhook(webhook).evaluate(eventType, asset);
              expect(verdict).toBe(referenceEvaluate(webhook, eventType, asset));
              expect(verdict === null).toBe(delivering.includes(position));
            });
          }
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('the routing index gives the same answer when asked again for other events in between', () => {
    fc.assert(
      fc.property(
        fc.array(webhookArb, { minLength: 1, maxLength: 8 }),
        fc.array(fc.tuple(assetArb, fc.constantFrom(...EVENT_TYPES)), { minLength: 1, maxLength: 6 }),
        (webhooks, events) => {
          const index = new RoutingIndex(webhooks);
          const first = events.map(([asset, eventType]) =>
            [...index.deliveringTo(eventType, asset)].sort((a, b) => a - b),
          );
          const again = events.map(([asset, eventType]) =>
            [...index.deliveringTo(eventType, asset)].sort((a, b) => a - b),
          );
          expect(again).toEqual(first);
        },
      ),
      { numRuns: 500 },
    );
  });
});
