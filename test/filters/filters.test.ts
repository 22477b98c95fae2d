import { describe, expect, it } from 'vitest';
import { compileWebhook } from '../../src/filters/compile.js';
import { explainWebhook } from '../../src/filters/explain.js';
import type { AssetState, EventType } from '../../src/interfaces.js';
import { asset, webhook } from '../helpers/assets.js';

function verdict(config: string, eventType: EventType, state: AssetState): string {
  return compileWebhook(webhook(config)).evaluate(eventType, state) ?? 'pass';
}

const tagged = asset({ keywords: ['summer', 'product'], fieldNames: ['campaign', 'campaign', 'region'], fieldValues: ['2026', '2027', 'emea'] });

describe('spec section 4.2: conditions within one filter group', () => {
  it.each([
    ['AND passes when every listed value is present', 'filters: [ { filterKind: keywords, condition: AND, value: [summer, product] } ]', 'pass'],
    ['AND fails when one listed value is missing', 'filters: [ { filterKind: keywords, condition: AND, value: [summer, winter] } ]', 'filter:1'],
    ['ANY passes when one listed value is present', 'filters: [ { filterKind: keywords, condition: ANY, value: [winter, product] } ]', 'pass'],
    ['ANY fails when none is present', 'filters: [ { filterKind: keywords, condition: ANY, value: [winter] } ]', 'filter:1'],
    ['NONE passes when none is present', 'filters: [ { filterKind: keywords, condition: NONE, value: [winter, archive] } ]', 'pass'],
    ['NONE fails when one is present', 'filters: [ { filterKind: keywords, condition: NONE, value: [winter, summer] } ]', 'filter:1'],
  ])('%s', (_name, config, expected) => {
    expect(verdict(config, 'EDITED', tagged)).toBe(expected);
  });
});

describe('spec section 4.2: order of checks', () => {
  const child = asset({ supertype: 'Project', parentId: 7, keywords: [] });
  it.each([
    ['PURGED passes every check', 'resourceTypes: [Template], eventTypes: [Created], filters: [ { filterKind: keywords, condition: ANY, value: [x] } ]', 'PURGED', 'pass'],
    ['resource type is checked before event type', 'resourceTypes: [Resource], eventTypes: [Created]', 'EDITED', 'resource_type'],
    ['event type is checked before parent', 'resourceTypes: [Project], eventTypes: [Created]', 'EDITED', 'event_type'],
    ['parent is checked before custom filters', 'resourceTypes: [Project], filters: [ { filterKind: keywords, condition: ANY, value: [x] } ]', 'EDITED', 'parent'],
    ['custom filters come last', 'resourceTypes: [Project], filters: [ { filterKind: parentId, condition: ANY, value: ["7"] }, { filterKind: keywords, condition: ANY, value: [x] } ]', 'EDITED', 'filter:2'],
  ] as const)('%s', (_name, config, eventType, expected) => {
    expect(verdict(config, eventType, child)).toBe(expected);
  });

  it('delivers PURGED to a webhook that filters on keywords', () => {
    expect(verdict('filters: [ { filterKind: keywords, condition: AND, value: [never] } ]', 'PURGED', asset())).toBe('pass');
  });

  it('does not deliver PURGED to a disabled webhook', () => {
    const disabled = { ...webhook(''), enabled: false };
    expect(compileWebhook(disabled).evaluate('PURGED', asset())).toBe('disabled');
  });
});

describe('spec section 4.2: defaults when an option is omitted', () => {
  it('resourceTypes omitted: only Resource passes', () => {
    expect(verdict('', 'CREATED', asset({ supertype: 'Resource' }))).toBe('pass');
    expect(verdict('', 'CREATED', asset({ supertype: 'Project' }))).toBe('resource_type');
  });
  it.each(['CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'] as const)('eventTypes omitted: %s passes', (type) => {
    expect(verdict('', type, asset())).toBe('pass');
  });
  it('filters omitted: no extra filtering', () => {
    expect(verdict('', 'EDITED', tagged)).toBe('pass');
  });
  it('parentId filter omitted: only top-level assets pass', () => {
    expect(verdict('', 'EDITED', asset({ parentId: 3 }))).toBe('parent');
  });
});

describe('CONTRACT section 3: where the spec is silent', () => {
  it('an absent field has no values: ANY fails, NONE passes, AND fails', () => {
    expect(verdict('filters: [ { filterKind: state, condition: ANY, value: [approved] } ]', 'EDITED', asset())).toBe('filter:1');
    expect(verdict('filters: [ { filterKind: state, condition: NONE, value: [approved] } ]', 'EDITED', asset())).toBe('pass');
    expect(verdict('filters: [ { filterKind: keywords, condition: AND, value: [a] } ]', 'EDITED', asset())).toBe('filter:1');
  });
  it('matching is exact and case-sensitive', () => {
    expect(verdict('filters: [ { filterKind: keywords, condition: ANY, value: [Summer] } ]', 'EDITED', tagged)).toBe('filter:1');
    expect(verdict('filters: [ { filterKind: state, condition: ANY, value: [approve] } ]', 'EDITED', asset({ state: 'approved' }))).toBe('filter:1');
  });
  it('resource types match exactly', () => {
    expect(verdict('resourceTypes: [resource]', 'EDITED', asset())).toBe('resource_type');
  });
  it('event type names match case-insensitively', () => {
    expect(verdict('eventTypes: [eDiTeD]', 'EDITED', asset())).toBe('pass');
  });
  it('numbers compare as decimal strings', () => {
    const numbered = asset({ schemaId: 12, typeId: 3, domainId: 0 });
    expect(verdict('filters: [ { filterKind: schemaId, condition: ANY, value: ["12"] } ]', 'EDITED', numbered)).toBe('pass');
    expect(verdict('filters: [ { filterKind: schemaId, condition: ANY, value: ["012"] } ]', 'EDITED', numbered)).toBe('filter:1');
    expect(verdict('filters: [ { filterKind: domainId, condition: ANY, value: ["0"] } ]', 'EDITED', numbered)).toBe('pass');
    expect(verdict('filters: [ { filterKind: typeId, condition: NONE, value: ["3"] } ]', 'EDITED', numbered)).toBe('filter:1');
  });
  it('parentId "null" matches top-level assets', () => {
    expect(verdict('filters: [ { filterKind: parentId, condition: ANY, value: ["null"] } ]', 'EDITED', asset())).toBe('pass');
    expect(verdict('filters: [ { filterKind: parentId, condition: ANY, value: ["null"] } ]', 'EDITED', asset({ parentId: 4 }))).toBe('filter:1');
  });
  it('a parentId filter of any condition lifts the top-level-only default', () => {
    expect(verdict('filters: [ { filterKind: parentId, condition: ANY, value: ["4"] } ]', 'EDITED', asset({ parentId: 4 }))).toBe('pass');
    expect(verdict('filters: [ { filterKind: parentId, condition: NONE, value: ["9"] } ]', 'EDITED', asset({ parentId: 4 }))).toBe('pass');
  });
  it('additionalFields without fieldName matches values across all fields', () => {
    expect(verdict('filters: [ { filterKind: additionalFields, condition: ANY, value: [emea] } ]', 'EDITED', tagged)).toBe('pass');
  });
  it('additionalFields with fieldName matches only that field', () => {
    expect(verdict('filters: [ { filterKind: additionalFields, fieldName: campaign, condition: ANY, value: [emea] } ]', 'EDITED', tagged)).toBe('filter:1');
    expect(verdict('filters: [ { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026", "2027"] } ]', 'EDITED', tagged)).toBe('pass');
    expect(verdict('filters: [ { filterKind: additionalFields, fieldName: region, condition: AND, value: ["2026"] } ]', 'EDITED', tagged)).toBe('filter:1');
  });
  it('a value list is a set: a repeated value does not change AND', () => {
    expect(verdict('filters: [ { filterKind: keywords, condition: AND, value: [summer, summer] } ]', 'EDITED', tagged)).toBe('pass');
  });
  it('several groups combine by AND and report the first that fails', () => {
    const config = 'filters: [ { filterKind: keywords, condition: ANY, value: [summer] }, { filterKind: state, condition: ANY, value: [approved] }, { filterKind: keywords, condition: NONE, value: [product] } ]';
    expect(verdict(config, 'EDITED', { ...tagged, state: 'approved' })).toBe('filter:3');
    expect(verdict(config, 'EDITED', { ...tagged, state: 'draft' })).toBe('filter:2');
  });
});

describe('explanations', () => {
  it('gives every check with the values compared, and skips those after the deciding one', () => {
    const explanation = explainWebhook(webhook('filters: [ { filterKind: keywords, condition: ANY, value: [winter] }, { filterKind: state, condition: ANY, value: [x] } ]'), 'EDITED', tagged);
    expect(explanation.excludedBy).toBe('filter:1');
    expect(explanation.checks.map((c) => [c.check, c.verdict])).toEqual([
      ['disabled', 'pass'], ['resource_type', 'pass'], ['event_type', 'pass'], ['parent', 'pass'], ['filter:1', 'fail'], ['filter:2', 'skipped'],
    ]);
    expect(explanation.checks[4]!.detail).toContain('the asset has [summer, product]');
  });
});
