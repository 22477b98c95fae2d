import { describe, expect, it } from 'vitest';
import { compileWebhook } from '../../src/filters/compile.js';
import { explainWebhook } from '../../src/filters/explain.js';
import type { AssetState, EventType } from '../../src/interfaces.js';
import { asset, webhook } from '../helpers/assets.js';

function verdict(config: string, eventType: EventType, state: AssetState): string {
  return compileWebhook(webhook(config)).evaluate(eventType, state) ?? 'pass';
}

const tagged = asset({
  keywords: ['summer', 'product'],
  fieldNames: ['campaign', 'campaign', 'region'],
  fieldValues: ['2026', '2027', 'emea'],
});

describe('spec section 4.2: conditions within one filter group', () => {
  it.each([
    [
      'AND passes when every listed value is present',
      'filters: [ { filterKind: keywords, condition: AND, value: [summer, product] } ]',
      'pass',
    ],
    [
      'AND fails when one listed value is missing',
      'filters: [ { filterKind: keywords, condition: AND, value: [summer, winter] } ]',
      'filter:1',
    ],
    [
      'ANY passes when one listed value is present',
      'filters: [ { filterKind: keywords, condition: ANY, value: [winter, product] } ]',
      'pass',
    ],
    [
      'ANY fails when none is present',
      'filters: [ { filterKind: keywords, condition: ANY, value: [winter] } ]',
      'filter:1',
    ],
    [
      'NONE passes when none is present',
      'filters: [ { filterKind: keywords, condition: NONE, value: [winter, archive] } ]',
      'pass',
    ],
    [
      'NONE fails when one is present',
      'filters: [ { filterKind: keywords, condition: NONE, value: [winter, summer] } ]',
      'filter:1',
    ],
  ])('%s', (_name, config, expected) => {
    expect(verdict(config, 'EDITED', tagged)).toBe(expected);
  });
});

describe('spec section 4.2: order of checks', () => {
  const child = asset({ supertype: 'Project', parentId: '7', keywords: [] });
  it.each([
    [
      'PURGED passes every check',
      'resourceTypes: [Template], eventTypes: [Created], filters: [ { filterKind: keywords, condition: ANY, value: [x] } ]',
      'PURGED',
      'pass',
    ],
    [
      'resource type is checked before event type',
      'resourceTypes: [Resource], eventTypes: [Created]',
      'EDITED',
      'resource_type',
    ],
    ['event type is checked before parent', 'resourceTypes: [Project], eventTypes: [Created]', 'EDITED', 'event_type'],
    [
      'parent is checked before custom filters',
      'resourceTypes: [Project], filters: [ { filterKind: keywords, condition: ANY, value: [x] } ]',
      'EDITED',
      'parent',
    ],
    [
      'custom filters come last',
      'resourceTypes: [Project], filters: [ { filterKind: parentId, condition: ANY, value: ["7"] }, { filterKind: keywords, condition: ANY, value: [x] } ]',
      'EDITED',
      'filter:2',
    ],
  ] as const)('%s', (_name, config, eventType, expected) => {
    expect(verdict(config, eventType, child)).toBe(expected);
  });

  it('delivers PURGED to a webhook that filters on keywords', () => {
    expect(verdict('filters: [ { filterKind: keywords, condition: AND, value: [never] } ]', 'PURGED', asset())).toBe(
      'pass',
    );
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
    expect(verdict('', 'EDITED', asset({ parentId: '3' }))).toBe('parent');
  });
});

describe('CONTRACT section 3: where the spec is silent', () => {
  it('an absent field has no values: ANY fails, NONE passes, AND fails', () => {
    expect(verdict('filters: [ { filterKind: state, condition: ANY, value: [approved] } ]', 'EDITED', asset())).toBe(
      'filter:1',
    );
    expect(verdict('filters: [ { filterKind: state, condition: NONE, value: [approved] } ]', 'EDITED', asset())).toBe(
      'pass',
    );
    expect(verdict('filters: [ { filterKind: keywords, condition: AND, value: [a] } ]', 'EDITED', asset())).toBe(
      'filter:1',
    );
  });
  it('matching is exact and case-sensitive', () => {
    expect(verdict('filters: [ { filterKind: keywords, condition: ANY, value: [Summer] } ]', 'EDITED', tagged)).toBe(
      'filter:1',
    );
    expect(
      verdict(
        'filters: [ { filterKind: state, condition: ANY, value: [approve] } ]',
        'EDITED',
        asset({ state: 'approved' }),
      ),
    ).toBe('filter:1');
  });
  it('resource types match exactly', () => {
    expect(verdict('resourceTypes: [resource]', 'EDITED', asset())).toBe('resource_type');
  });
  it('event type names match case-insensitively', () => {
    expect(verdict('eventTypes: [eDiTeD]', 'EDITED', asset())).toBe('pass');
  });
  it('numbers compare as decimal strings', () => {
    const numbered = asset({ schemaId: '12', typeId: '3', domainId: '0' });
    expect(verdict('filters: [ { filterKind: schemaId, condition: ANY, value: ["12"] } ]', 'EDITED', numbered)).toBe(
      'pass',
    );
    expect(verdict('filters: [ { filterKind: schemaId, condition: ANY, value: ["120"] } ]', 'EDITED', numbered)).toBe(
      'filter:1',
    );
    expect(verdict('filters: [ { filterKind: domainId, condition: ANY, value: ["0"] } ]', 'EDITED', numbered)).toBe(
      'pass',
    );
    expect(verdict('filters: [ { filterKind: typeId, condition: NONE, value: ["3"] } ]', 'EDITED', numbered)).toBe(
      'filter:1',
    );
  });
  it('ids beyond 2^53 compare digit for digit, never rounded into their neighbour', () => {
    const top = asset({ domainId: '9007199254740993' });
    expect(
      verdict('filters: [ { filterKind: domainId, condition: ANY, value: ["9007199254740993"] } ]', 'EDITED', top),
    ).toBe('pass');
    expect(
      verdict('filters: [ { filterKind: domainId, condition: ANY, value: ["9007199254740992"] } ]', 'EDITED', top),
    ).toBe('filter:1');
    const child = asset({ parentId: '9007199254740993' });
    expect(
      verdict('filters: [ { filterKind: parentId, condition: ANY, value: ["9007199254740993"] } ]', 'EDITED', child),
    ).toBe('pass');
    expect(
      verdict('filters: [ { filterKind: parentId, condition: ANY, value: ["9007199254740992"] } ]', 'EDITED', child),
    ).toBe('filter:1');
  });
  it('parentId "null" matches top-level assets', () => {
    expect(verdict('filters: [ { filterKind: parentId, condition: ANY, value: ["null"] } ]', 'EDITED', asset())).toBe(
      'pass',
    );
    expect(
      verdict(
        'filters: [ { filterKind: parentId, condition: ANY, value: ["null"] } ]',
        'EDITED',
        asset({ parentId: '4' }),
      ),
    ).toBe('filter:1');
  });
  it('a parentId filter of any condition lifts the top-level-only default', () => {
    expect(
      verdict(
        'filters: [ { filterKind: parentId, condition: ANY, value: ["4"] } ]',
        'EDITED',
        asset({ parentId: '4' }),
      ),
    ).toBe('pass');
    expect(
      verdict(
        'filters: [ { filterKind: parentId, condition: NONE, value: ["9"] } ]',
        'EDITED',
        asset({ parentId: '4' }),
      ),
    ).toBe('pass');
  });
  it('additionalFields without fieldName matches values across all fields', () => {
    expect(
      verdict('filters: [ { filterKind: additionalFields, condition: ANY, value: [emea] } ]', 'EDITED', tagged),
    ).toBe('pass');
  });
  it('additionalFields with fieldName matches only that field', () => {
    expect(
      verdict(
        'filters: [ { filterKind: additionalFields, fieldName: campaign, condition: ANY, value: [emea] } ]',
        'EDITED',
        tagged,
      ),
    ).toBe('filter:1');
    expect(
      verdict(
        'filters: [ { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026", "2027"] } ]',
        'EDITED',
        tagged,
      ),
    ).toBe('pass');
    expect(
      verdict(
        'filters: [ { filterKind: additionalFields, fieldName: region, condition: AND, value: ["2026"] } ]',
        'EDITED',
        tagged,
      ),
    ).toBe('filter:1');
  });
  it('a value list is a set: a repeated value does not change AND', () => {
    expect(
      verdict('filters: [ { filterKind: keywords, condition: AND, value: [summer, summer] } ]', 'EDITED', tagged),
    ).toBe('pass');
  });
  it('several groups combine by AND and report the first that fails', () => {
    const config =
      'filters: [ { filterKind: keywords, condition: ANY, value: [summer] }, { filterKind: state, condition: ANY, value: [approved] }, { filterKind: keywords, condition: NONE, value: [product] } ]';
    expect(verdict(config, 'EDITED', { ...tagged, state: 'approved' })).toBe('filter:3');
    expect(verdict(config, 'EDITED', { ...tagged, state: 'draft' })).toBe('filter:2');
  });
});

describe('CONTRACT section 3: single-valued fields (state, schemaId, typeId, domainId, parentId)', () => {
  const numbered = asset({ state: 'approved', schemaId: '12', typeId: '3', domainId: '0', parentId: null });
  it.each([
    [
      'AND of one value present passes',
      'filters: [ { filterKind: state, condition: AND, value: [approved] } ]',
      'pass',
    ],
    [
      'AND of two different values never passes (one value cannot be both)',
      'filters: [ { filterKind: state, condition: AND, value: [approved, draft] } ]',
      'filter:1',
    ],
    [
      'AND of a value repeated passes like the value once',
      'filters: [ { filterKind: schemaId, condition: AND, value: ["12", "12"] } ]',
      'pass',
    ],
    [
      'ANY of two with one present passes',
      'filters: [ { filterKind: typeId, condition: ANY, value: ["4", "3"] } ]',
      'pass',
    ],
    [
      'NONE of values not present passes',
      'filters: [ { filterKind: domainId, condition: NONE, value: ["1", "2"] } ]',
      'pass',
    ],
    ['zero matches "0"', 'filters: [ { filterKind: domainId, condition: AND, value: ["0"] } ]', 'pass'],
    [
      "a listed number beyond the asset's does not match",
      'filters: [ { filterKind: schemaId, condition: ANY, value: ["120", "1"] } ]',
      'filter:1',
    ],
  ])('%s', (_name, config, expected) => {
    expect(verdict(config, 'EDITED', numbered)).toBe(expected);
  });

  it.each([
    [
      'an absent schemaId has no value: ANY fails',
      'filters: [ { filterKind: schemaId, condition: ANY, value: ["0"] } ]',
      'filter:1',
    ],
    [
      'an absent typeId has no value: NONE passes',
      'filters: [ { filterKind: typeId, condition: NONE, value: ["0"] } ]',
      'pass',
    ],
    [
      'an absent domainId has no value: AND fails',
      'filters: [ { filterKind: domainId, condition: AND, value: ["1"] } ]',
      'filter:1',
    ],
    [
      'an absent state is not the string "null"',
      'filters: [ { filterKind: state, condition: ANY, value: ["null"] } ]',
      'filter:1',
    ],
  ])('%s', (_name, config, expected) => {
    expect(verdict(config, 'EDITED', asset())).toBe(expected);
  });

  it.each([
    [
      'parentId NONE ["null"] excludes top-level assets',
      'filters: [ { filterKind: parentId, condition: NONE, value: ["null"] } ]',
      null,
      'filter:1',
    ],
    [
      'parentId NONE ["null"] lets children through',
      'filters: [ { filterKind: parentId, condition: NONE, value: ["null"] } ]',
      '4',
      'pass',
    ],
    [
      'parentId ANY ["null", "4"] takes top-level assets',
      'filters: [ { filterKind: parentId, condition: ANY, value: ["null", "4"] } ]',
      null,
      'pass',
    ],
    [
      'parentId ANY ["null", "4"] takes children of 4',
      'filters: [ { filterKind: parentId, condition: ANY, value: ["null", "4"] } ]',
      '4',
      'pass',
    ],
    [
      'parentId ANY ["null", "4"] excludes children of 5',
      'filters: [ { filterKind: parentId, condition: ANY, value: ["null", "4"] } ]',
      '5',
      'filter:1',
    ],
    [
      'a parentId filter in a later group still lifts the default',
      'filters: [ { filterKind: keywords, condition: NONE, value: [x] }, { filterKind: parentId, condition: NONE, value: ["9"] } ]',
      '4',
      'pass',
    ],
  ] as const)('%s', (_name, config, parentId, expected) => {
    expect(verdict(config, 'EDITED', asset({ parentId }))).toBe(expected);
  });
});

describe('CONTRACT section 3: additionalFields', () => {
  const fields = asset({ fieldNames: ['campaign', 'region', 'region'], fieldValues: ['2026', 'emea', 'apac'] });
  it.each([
    [
      'without fieldName, AND may take its values from different fields',
      'filters: [ { filterKind: additionalFields, condition: AND, value: ["2026", emea] } ]',
      'pass',
    ],
    [
      'with fieldName, AND needs every value in that field',
      'filters: [ { filterKind: additionalFields, fieldName: region, condition: AND, value: [emea, apac] } ]',
      'pass',
    ],
    [
      'with fieldName, a value of another field does not count for AND',
      'filters: [ { filterKind: additionalFields, fieldName: region, condition: AND, value: [emea, "2026"] } ]',
      'filter:1',
    ],
    [
      'with fieldName, NONE ignores the same value in another field',
      'filters: [ { filterKind: additionalFields, fieldName: region, condition: NONE, value: ["2026"] } ]',
      'pass',
    ],
    [
      'without fieldName, NONE sees every field',
      'filters: [ { filterKind: additionalFields, condition: NONE, value: ["2026"] } ]',
      'filter:1',
    ],
    [
      'a field name that the asset lacks has no values: ANY fails',
      'filters: [ { filterKind: additionalFields, fieldName: season, condition: ANY, value: [emea] } ]',
      'filter:1',
    ],
    [
      'a field name that the asset lacks has no values: NONE passes',
      'filters: [ { filterKind: additionalFields, fieldName: season, condition: NONE, value: [emea] } ]',
      'pass',
    ],
    [
      'field names match case-sensitively',
      'filters: [ { filterKind: additionalFields, fieldName: Region, condition: ANY, value: [emea] } ]',
      'filter:1',
    ],
  ])('%s', (_name, config, expected) => {
    expect(verdict(config, 'EDITED', fields)).toBe(expected);
  });

  it('an asset without additional fields has no values: ANY fails, NONE passes', () => {
    expect(
      verdict('filters: [ { filterKind: additionalFields, condition: ANY, value: [emea] } ]', 'EDITED', asset()),
    ).toBe('filter:1');
    expect(
      verdict(
        'filters: [ { filterKind: additionalFields, fieldName: region, condition: NONE, value: [emea] } ]',
        'EDITED',
        asset(),
      ),
    ).toBe('pass');
  });
});

describe('PURGED and disabled webhooks', () => {
  const excludedEverywhere =
    'resourceTypes: [Template], eventTypes: [Created], filters: [ { filterKind: keywords, condition: AND, value: [never] }, { filterKind: state, condition: ANY, value: [x] } ]';
  it.each([
    ['PURGED of a child asset reaches a webhook without a parentId filter', '', asset({ parentId: '9' }), 'pass'],
    ['PURGED reaches a webhook whose eventTypes leave Purged out', 'eventTypes: [Created, Edited]', asset(), 'pass'],
    [
      'PURGED reaches a webhook that every other check would exclude',
      excludedEverywhere,
      asset({ supertype: 'Project', parentId: '9' }),
      'pass',
    ],
  ])('%s', (_name, config, subject, expected) => {
    expect(verdict(config, 'PURGED', subject)).toBe(expected);
  });

  it.each(['CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'] as const)(
    'a disabled webhook receives no %s',
    (eventType) => {
      const disabled = { ...webhook(''), enabled: false };
      expect(compileWebhook(disabled).evaluate(eventType, asset())).toBe('disabled');
    },
  );
});

describe('explanations', () => {
  it('gives every check with the values compared, and skips those after the deciding one', () => {
    const explanation = explainWebhook(
      webhook(
        'filters: [ { filterKind: keywords, condition: ANY, value: [winter] }, { filterKind: state, condition: ANY, value: [x] } ]',
      ),
      'EDITED',
      tagged,
    );
    expect(explanation.excludedBy).toBe('filter:1');
    expect(explanation.checks.map((c) => [c.check, c.verdict])).toEqual([
      ['disabled', 'pass'],
      ['resource_type', 'pass'],
      ['event_type', 'pass'],
      ['parent', 'pass'],
      ['filter:1', 'fail'],
      ['filter:2', 'skipped'],
    ]);
    expect(explanation.checks[4]!.detail).toBe(
      'keywords ANY [winter]: the asset has [summer, product], matching none: ANY needs at least one listed value, none is present',
    );
  });

  it('names what AND misses and what NONE found', () => {
    const and = explainWebhook(
      webhook('filters: [ { filterKind: keywords, condition: AND, value: [summer, winter] } ]'),
      'EDITED',
      tagged,
    );
    expect(and.checks.at(-1)!.detail).toBe(
      'keywords AND [summer, winter]: the asset has [summer, product], matching [summer]: AND needs every listed value, missing [winter]',
    );
    const none = explainWebhook(
      webhook('filters: [ { filterKind: additionalFields, fieldName: campaign, condition: NONE, value: ["2027"] } ]'),
      'EDITED',
      tagged,
    );
    expect(none.checks.at(-1)!.detail).toBe(
      'additionalFields[campaign] NONE [2027]: the asset has [2026, 2027], matching [2027]: NONE allows no listed value, but some are present',
    );
    const absent = explainWebhook(
      webhook('filters: [ { filterKind: state, condition: NONE, value: [archived] } ]'),
      'EDITED',
      asset(),
    );
    expect(absent.checks.at(-1)).toEqual({
      check: 'filter:1',
      verdict: 'pass',
      detail: 'state NONE [archived]: the asset has no value, matching none: no listed value is present',
    });
  });

  it('shows the PURGED bypass and marks the later checks skipped', () => {
    const explanation = explainWebhook(webhook('resourceTypes: [Project]'), 'PURGED', asset());
    expect(explanation).toMatchObject({ delivered: true, excludedBy: null });
    expect(explanation.checks.map((c) => [c.check, c.verdict])).toEqual([
      ['disabled', 'pass'],
      ['purged_bypass', 'pass'],
      ['resource_type', 'skipped'],
      ['event_type', 'skipped'],
      ['parent', 'skipped'],
    ]);
    expect(explanation.checks[2]!.detail).toBe(
      'supertype "Resource" is not in resourceTypes [Project] (skipped: PURGED)',
    );
  });

  it('a disabled webhook: PURGED excluded by disabled, no bypass shown', () => {
    const explanation = explainWebhook({ ...webhook(''), enabled: false }, 'PURGED', asset());
    expect(explanation).toMatchObject({ delivered: false, excludedBy: 'disabled' });
    expect(explanation.checks.map((c) => c.check)).not.toContain('purged_bypass');
    expect(explanation.checks[0]).toEqual({
      check: 'disabled',
      verdict: 'fail',
      detail: 'the webhook is disabled: it receives nothing, PURGED included',
    });
  });

  it('explains a child asset excluded by the parent check', () => {
    const explanation = explainWebhook(webhook(''), 'EDITED', asset({ parentId: '42' }));
    expect(explanation.excludedBy).toBe('parent');
    expect(explanation.checks[3]!.detail).toBe(
      'the asset is a child (parentId 42); only top-level assets pass without a parentId filter',
    );
  });
});
