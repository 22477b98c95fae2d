import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { configSchema, type FilterGroup, type WebhookConfig } from '../../src/config/schema.js';
import { compileWebhook } from '../../src/filters/compile.js';
import { explainWebhook } from '../../src/filters/explain.js';
import { referenceEvaluate } from '../../src/filters/reference.js';
import { EVENT_TYPES, type AssetState } from '../../src/interfaces.js';

// Small alphabets so that random assets and random filters often meet.
const word = fc.constantFrom('a', 'b', 'c', 'A', '1', '12', 'null', '');
const listedNumber = fc.constantFrom('0', '1', '2', '12', '120');
const assetNumber = fc.option(fc.constantFrom('0', '1', '2', '12'), { nil: null });
const conditionArb = fc.constantFrom('AND' as const, 'ANY' as const, 'NONE' as const);

const assetArb: fc.Arbitrary<AssetState> = fc.record({
  supertype: fc.constantFrom('Resource', 'Project', 'Template', 'resource'),
  parentId: fc.option(fc.constantFrom('1', '2', '12'), { nil: null }),
  state: fc.option(word, { nil: null }),
  schemaId: assetNumber,
  typeId: assetNumber,
  domainId: assetNumber,
  keywords: fc.uniqueArray(word, { maxLength: 4 }),
  fields: fc.array(fc.tuple(fc.constantFrom('campaign', 'region'), word), { maxLength: 4 }),
}).map(({ fields, ...rest }) => ({
  ...rest,
  assetId: '1',
  assetUuid: '00000000-0000-4000-8000-000000000001',
  latestAtomId: null,
  fieldNames: fields.map(([name]) => name),
  fieldValues: fields.map(([, value]) => value),
}));

/** Filter groups as a configuration document writes them (before the schema). */
const groupArb = fc.oneof(
  fc.record({ filterKind: fc.constantFrom('keywords', 'state', 'additionalFields'), condition: conditionArb, value: fc.array(word, { minLength: 1, maxLength: 3 }) }),
  fc.record({ filterKind: fc.constant('additionalFields'), fieldName: fc.constantFrom('campaign', 'region'), condition: conditionArb, value: fc.array(word, { minLength: 1, maxLength: 3 }) }),
  fc.record({ filterKind: fc.constantFrom('schemaId', 'typeId', 'domainId'), condition: conditionArb, value: fc.array(listedNumber, { minLength: 1, maxLength: 3 }) }),
  fc.record({ filterKind: fc.constant('parentId'), condition: conditionArb, value: fc.array(fc.constantFrom('null', '1', '12', '120'), { minLength: 1, maxLength: 2 }) }),
);

/** Event type names in any case, as a configuration may write them. */
const eventTypeName = fc.constantFrom(...EVENT_TYPES).chain((type) =>
  fc.constantFrom(type, type.toLowerCase(), type[0] + type.slice(1).toLowerCase()));

/** A webhook document with options present or omitted, parsed through the real schema (defaults as in production). */
const webhookArb: fc.Arbitrary<WebhookConfig> = fc.record({
  url: fc.constant('https://receiver.example/hook'),
  enabled: fc.boolean(),
  resourceTypes: fc.uniqueArray(fc.constantFrom('Resource', 'Project', 'Template'), { minLength: 1 }),
  eventTypes: fc.array(eventTypeName, { minLength: 1, maxLength: 5 }),
  filters: fc.array(groupArb, { maxLength: 3 }),
}, { requiredKeys: ['url', 'enabled'] }).map((document) => configSchema.parse({ assetUpdater: { webhooks: [document] } }).assetUpdater.webhooks[0]!);

/** One group on a webhook that lets every asset reach the filters. */
function withOneGroup(group: unknown): WebhookConfig {
  const document = { url: 'https://receiver.example/hook', enabled: true, resourceTypes: ['Resource', 'Project', 'Template', 'resource'], filters: [group] };
  return configSchema.parse({ assetUpdater: { webhooks: [document] } }).assetUpdater.webhooks[0]!;
}

/** Whether the group passes, through the compiled predicate; the asset is made top-level so only the group decides. */
function passes(group: FilterGroup, asset: AssetState): boolean {
  const reachable = group.filterKind === 'parentId' ? asset : { ...asset, parentId: null };
  return compileWebhook(withOneGroup(group)).evaluate('EDITED', reachable) === null;
}

const groupOf = (condition: FilterGroup['condition']) => (group: FilterGroup): FilterGroup => ({ ...group, condition });

describe('filter properties', () => {
  it('NONE(values) is exactly not ANY(values), for every filter kind', () => {
    fc.assert(fc.property(groupArb, assetArb, (group, asset) => {
      const parsed = withOneGroup(group).filters[0]!;
      expect(passes(groupOf('NONE')(parsed), asset)).toBe(!passes(groupOf('ANY')(parsed), asset));
    }), { numRuns: 2000 });
  });

  it('AND of one value equals ANY of it, for every filter kind', () => {
    fc.assert(fc.property(groupArb, assetArb, (group, asset) => {
      const parsed = withOneGroup(group).filters[0]!;
      const one = { ...parsed, value: [parsed.value[0]!] };
      expect(passes(groupOf('AND')(one), asset)).toBe(passes(groupOf('ANY')(one), asset));
    }), { numRuns: 2000 });
  });

  it('a value list is a set: repeating or reordering values changes nothing', () => {
    fc.assert(fc.property(groupArb, assetArb, (group, asset) => {
      const parsed = withOneGroup(group).filters[0]!;
      const shuffled = { ...parsed, value: [...parsed.value].reverse().concat(parsed.value) };
      expect(passes(shuffled, asset)).toBe(passes(parsed, asset));
    }), { numRuns: 1000 });
  });

  it('the compiled predicate agrees with the plain reference evaluation', () => {
    fc.assert(fc.property(webhookArb, assetArb, fc.constantFrom(...EVENT_TYPES), (webhook, asset, eventType) => {
      expect(compileWebhook(webhook).evaluate(eventType, asset)).toBe(referenceEvaluate(webhook, eventType, asset));
    }), { numRuns: 5000 });
  });

  it('explain reaches the reference verdict, failing exactly the deciding check and skipping the rest', () => {
    fc.assert(fc.property(webhookArb, assetArb, fc.constantFrom(...EVENT_TYPES), (webhook, asset, eventType) => {
      const explanation = explainWebhook(webhook, eventType, asset);
      const expected = referenceEvaluate(webhook, eventType, asset);
      expect(explanation.excludedBy).toBe(expected);
      expect(explanation.delivered).toBe(expected === null);
      const failed = explanation.checks.filter((check) => check.verdict === 'fail').map((check) => check.check);
      expect(failed).toEqual(expected === null ? [] : [expected]);
      const decided = explanation.checks.findIndex((check) => check.verdict === 'fail');
      if (decided >= 0) expect(explanation.checks.slice(decided + 1).every((check) => check.verdict === 'skipped')).toBe(true);
      expect(explanation.checks.filter((check) => check.check.startsWith('filter:'))).toHaveLength(webhook.filters.length);
    }), { numRuns: 2000 });
  });

  it('PURGED reaches every enabled webhook and no disabled one', () => {
    fc.assert(fc.property(webhookArb, assetArb, (webhook, asset) => {
      expect(compileWebhook(webhook).evaluate('PURGED', asset)).toBe(webhook.enabled ? null : 'disabled');
    }));
  });
});
