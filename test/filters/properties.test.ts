import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FilterGroup, WebhookConfig } from '../../src/config/schema.js';
import { compileWebhook } from '../../src/filters/compile.js';
import { explainWebhook } from '../../src/filters/explain.js';
import { EVENT_TYPES, type AssetState } from '../../src/interfaces.js';
import { webhook as parseWebhook } from '../helpers/assets.js';

const word = fc.constantFrom('a', 'b', 'c', 'd', 'A', '1', '2', 'null');
const digits = fc.constantFrom('0', '1', '2', '12');

const assetArb: fc.Arbitrary<AssetState> = fc.record({
  assetId: fc.constant(1),
  assetUuid: fc.constant('00000000-0000-4000-8000-000000000001'),
  supertype: fc.constantFrom('Resource', 'Project', 'Template'),
  parentId: fc.option(fc.constantFrom(1, 2, 12), { nil: null }),
  state: fc.option(word, { nil: null }),
  schemaId: fc.option(fc.constantFrom(0, 1, 2, 12), { nil: null }),
  typeId: fc.option(fc.constantFrom(0, 1, 2), { nil: null }),
  domainId: fc.option(fc.constantFrom(0, 1, 2), { nil: null }),
  latestAtomId: fc.constant(null),
  keywords: fc.uniqueArray(word, { maxLength: 4 }),
  fieldNames: fc.constant([] as string[]),
  fieldValues: fc.constant([] as string[]),
}).chain((base) => fc.array(fc.tuple(fc.constantFrom('campaign', 'region'), word), { maxLength: 4 }).map((fields) => ({
  ...base, fieldNames: fields.map(([name]) => name), fieldValues: fields.map(([, value]) => value),
})));

const groupArb: fc.Arbitrary<FilterGroup> = fc.oneof(
  fc.record({ filterKind: fc.constantFrom('keywords' as const, 'state' as const), condition: fc.constantFrom('AND' as const, 'ANY' as const, 'NONE' as const), value: fc.array(word, { minLength: 1, maxLength: 3 }) }),
  fc.record({ filterKind: fc.constant('additionalFields' as const), condition: fc.constantFrom('AND' as const, 'ANY' as const, 'NONE' as const), value: fc.array(word, { minLength: 1, maxLength: 3 }), fieldName: fc.constantFrom('campaign', 'region') }),
  fc.record({ filterKind: fc.constantFrom('schemaId' as const, 'typeId' as const, 'domainId' as const), condition: fc.constantFrom('AND' as const, 'ANY' as const, 'NONE' as const), value: fc.array(digits, { minLength: 1, maxLength: 3 }) }),
  fc.record({ filterKind: fc.constant('parentId' as const), condition: fc.constantFrom('AND' as const, 'ANY' as const, 'NONE' as const), value: fc.array(fc.constantFrom('null', '1', '12'), { minLength: 1, maxLength: 2 }) }),
);

const webhookArb: fc.Arbitrary<WebhookConfig> = fc.record({
  enabled: fc.boolean(),
  resourceTypes: fc.uniqueArray(fc.constantFrom('Resource', 'Project', 'Template'), { minLength: 1 }),
  eventTypes: fc.option(fc.uniqueArray(fc.constantFrom(...EVENT_TYPES), { minLength: 1 }), { nil: undefined }),
  filters: fc.array(groupArb, { maxLength: 3 }),
}).map((parts) => ({ ...parseWebhook(''), ...parts }));

const single = (kind: FilterGroup['filterKind'], condition: FilterGroup['condition'], value: string[]): WebhookConfig =>
  ({ ...parseWebhook('resourceTypes: [Resource, Project, Template]'), filters: [{ filterKind: kind, condition, value }], enabled: true });

describe('filter properties', () => {
  it('NONE(values) is exactly not ANY(values)', () => {
    fc.assert(fc.property(assetArb, fc.array(word, { minLength: 1, maxLength: 3 }), fc.constantFrom('keywords' as const, 'state' as const, 'parentId' as const), (state, values, kind) => {
      const top = { ...state, parentId: null };
      const none = compileWebhook(single(kind, 'NONE', values)).evaluate('EDITED', top) === null;
      const any = compileWebhook(single(kind, 'ANY', values)).evaluate('EDITED', top) === null;
      expect(none).toBe(!any);
    }));
  });

  it('AND of one value equals ANY of it', () => {
    fc.assert(fc.property(assetArb, word, (state, value) => {
      const top = { ...state, parentId: null };
      expect(compileWebhook(single('keywords', 'AND', [value])).evaluate('EDITED', top))
        .toBe(compileWebhook(single('keywords', 'ANY', [value])).evaluate('EDITED', top));
    }));
  });

  it('the compiled predicate agrees with the plain reference evaluation', () => {
    fc.assert(fc.property(webhookArb, assetArb, fc.constantFrom(...EVENT_TYPES), (config, state, eventType) => {
      expect(compileWebhook(config).evaluate(eventType, state)).toBe(explainWebhook(config, eventType, state).excludedBy);
    }), { numRuns: 2000 });
  });
});
