import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/** src/config/schema/filters.ts: one entry of a webhook's `filters`. */
const { refuses, reads } = useSchemaTable();
const filters = (config: Config) => config.assetUpdater.webhooks[0]!.filters;
const at = 'assetUpdater.webhooks[0].filters[0]';
const group = (fields: Record<string, unknown>) => ({
  webhook: { filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['summer'], ...fields }] },
});
const KINDS = 'keywords, additionalFields, state, schemaId, typeId, domainId, parentId';

describe('a filter group: filterKind, condition and a non-empty value list; fieldName only for additionalFields', () => {
  reads([
    ['none by default', {}, filters, []],
    ['a keywords group', group({}), filters, [{ filterKind: 'keywords', condition: 'ANY', value: ['summer'] }]],
    [
      'an additionalFields group with a fieldName',
      group({ filterKind: 'additionalFields', condition: 'AND', value: ['2026'], fieldName: 'campaign' }),
      filters,
      [{ filterKind: 'additionalFields', condition: 'AND', value: ['2026'], fieldName: 'campaign' }],
    ],
    [
      'a parentId of "null" (top level) and numbers',
      group({ filterKind: 'parentId', condition: 'NONE', value: ['null', '0', '12'] }),
      (c) => filters(c)[0]!.value,
      ['null', '0', '12'],
    ],
    [
      'a schemaId beyond 2^53, kept as text',
      group({ filterKind: 'schemaId', value: ['9007199254740993'] }),
      (c) => filters(c)[0]!.value,
      ['9007199254740993'],
    ],
  ]);
  refuses([
    ['a string for the group', { webhook: { filters: ['keywords'] } }, `${at}: expected a mapping, got "keywords"`],
    ['an unknown filterKind', group({ filterKind: 'tags' }), `${at}.filterKind: expected one of ${KINDS}, got "tags"`],
    ['no filterKind', group({ filterKind: undefined }), `${at}.filterKind: expected one of ${KINDS}, got nothing`],
    ['the condition OR', group({ condition: 'OR' }), `${at}.condition: expected one of AND, ANY, NONE, got "OR"`],
    [
      'a condition in lower case',
      group({ condition: 'any' }),
      `${at}.condition: expected one of AND, ANY, NONE, got "any"`,
    ],
    ['an empty value list', group({ value: [] }), `${at}.value: expected at least one value, got an empty list`],
    [
      'a string for the value list',
      group({ value: 'summer' }),
      `${at}.value: expected a list of strings, got "summer"`,
    ],
    ['no value list', group({ value: undefined }), `${at}.value: expected a list of strings, got nothing`],
    [
      'a number among the values',
      group({ value: ['summer', 2026] }),
      `${at}.value[1]: expected a string (quote numbers: "2026"), got 2026`,
    ],
    [
      'a fieldName on a keywords group',
      group({ fieldName: 'campaign' }),
      `${at}.fieldName: expected no fieldName on a keywords filter (only additionalFields takes one), got "campaign"`,
    ],
    [
      'an empty fieldName',
      group({ filterKind: 'additionalFields', fieldName: '' }),
      `${at}.fieldName: expected a non-empty string, got ""`,
    ],
    [
      'a schemaId with a leading zero',
      group({ filterKind: 'schemaId', value: ['007'] }),
      `${at}.value[0]: expected a string of digits without leading zeros, got "007"`,
    ],
    [
      'a negative typeId',
      group({ filterKind: 'typeId', value: ['-1'] }),
      `${at}.value[0]: expected a string of digits without leading zeros, got "-1"`,
    ],
    [
      'a domainId of "null"',
      group({ filterKind: 'domainId', value: ['null'] }),
      `${at}.value[0]: expected a string of digits without leading zeros, got "null"`,
    ],
    [
      'a parentId that is no number',
      group({ filterKind: 'parentId', value: ['null', 'top'] }),
      `${at}.value[1]: expected a string of digits without leading zeros or "null", got "top"`,
    ],
    [
      'an unknown key (a typo)',
      group({ values: ['winter'] }),
      `${at}.values: expected no such key (check the spelling), got unknown key "values"`,
    ],
  ]);
});
