import fc from 'fast-check';
import { configSchema, type WebhookConfig } from '../../src/config/schema.js';
import { EVENT_TYPES, type AssetState } from '../../src/interfaces.js';

// Small alphabets so that random assets and random filters often meet.
const word = fc.constantFrom('a', 'b', 'c', 'A', '1', '12', 'null', '');
const listedNumber = fc.constantFrom('0', '1', '2', '12', '120');
const assetNumber = fc.option(fc.constantFrom('0', '1', '2', '12'), { nil: null });
const conditionArb = fc.constantFrom('AND' as const, 'ANY' as const, 'NONE' as const);

export const assetArb: fc.Arbitrary<AssetState> = fc
  .record({
    supertype: fc.constantFrom('Resource', 'Project', 'Template', 'resource'),
    parentId: fc.option(fc.constantFrom('1', '2', '12'), { nil: null }),
    state: fc.option(word, { nil: null }),
    schemaId: assetNumber,
    typeId: assetNumber,
    domainId: assetNumber,
    keywords: fc.uniqueArray(word, { maxLength: 4 }),
    fields: fc.array(fc.tuple(fc.constantFrom('campaign', 'region'), word), { maxLength: 4 }),
  })
  .map(({ fields, ...rest }) => ({
    ...rest,
    assetId: '1',
    assetUuid: '00000000-0000-4000-8000-000000000001',
    latestAtomId: null,
    fieldNames: fields.map(([name]) => name),
    fieldValues: fields.map(([, value]) => value),
  }));

/** Filter groups as a configuration document writes them (before the schema). */
export const groupArb = fc.oneof(
  fc.record({
    filterKind: fc.constantFrom('keywords', 'state', 'additionalFields'),
    condition: conditionArb,
    value: fc.array(word, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({
    filterKind: fc.constant('additionalFields'),
    fieldName: fc.constantFrom('campaign', 'region'),
    condition: conditionArb,
    value: fc.array(word, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({
    filterKind: fc.constantFrom('schemaId', 'typeId', 'domainId'),
    condition: conditionArb,
    value: fc.array(listedNumber, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({
    filterKind: fc.constant('parentId'),
    condition: conditionArb,
    value: fc.array(fc.constantFrom('null', '1', '12', '120'), { minLength: 1, maxLength: 2 }),
  }),
);

/** Event type names in any case, as a configuration may write them. */
const eventTypeName = fc
  .constantFrom(...EVENT_TYPES)
  .chain((type) => fc.constantFrom(type, type.toLowerCase(), type[0] + type.slice(1).toLowerCase()));

/** A webhook document with options present or omitted, parsed through the real schema (defaults as in production). */
export const webhookArb: fc.Arbitrary<WebhookConfig> = fc
  .record(
    {
      url: fc.constant('https://receiver.example/hook'),
      enabled: fc.boolean(),
      resourceTypes: fc.uniqueArray(fc.constantFrom('Resource', 'Project', 'Template'), { minLength: 1 }),
      eventTypes: fc.array(eventTypeName, { minLength: 1, maxLength: 5 }),
      filters: fc.array(groupArb, { maxLength: 3 }),
    },
    { requiredKeys: ['url', 'enabled'] },
  )
  .map((document) => configSchema.parse({ assetUpdater: { webhooks: [document] } }).assetUpdater.webhooks[0]!);
