import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/interfaces.js';
import { serializeBody, serializeEvent, type PayloadEvent } from '../../src/payloads/serialize.js';
import { payloadSchemaErrors, sampleEvent } from '../helpers/payload-schema.js';

const schema = JSON.parse(readFileSync(new URL('../../schema/payload.schema.json', import.meta.url), 'utf8')) as {
  examples: unknown[];
};

const event = sampleEvent;
const body = (events: PayloadEvent[]): string => serializeBody(events.map(serializeEvent), '2026-11-27T09:15:00.004Z');

describe('schema/payload.schema.json', () => {
  it('accepts its own examples', () => {
    expect(schema.examples.length).toBeGreaterThan(0);
    for (const example of schema.examples) expect(payloadSchemaErrors(JSON.stringify(example))).toEqual([]);
  });

  it('accepts every body the serializer makes, ids beyond 2^53 included', () => {
    const events = fc.array(
      fc.record({
        atomId: fc.option(fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String), { nil: null }),
        eventId: fc.uuid(),
        eventTimestamp: fc
          .date({
            min: new Date('1970-01-01T00:00:00.000Z'),
            max: new Date('9999-12-31T23:59:59.999Z'),
            noInvalidDate: true,
          })
          .map((date) => date.toISOString()),
        assetId: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String),
        assetUuid: fc.uuid(),
        eventType: fc.constantFrom(...EVENT_TYPES),
      }),
      { minLength: 1, maxLength: 100 },
    );
    fc.assert(
      fc.property(events, (generated) => {
        const valid = generated.map((e) => (e.eventType === 'PURGED' ? { ...e, atomId: null } : e));
        expect(payloadSchemaErrors(body(valid))).toEqual([]);
      }),
    );
  });

  it.each([
    ['an extra event key', body([event()]).replace('"atomId"', '"extra":1,"atomId"')],
    ['an extra top-level key', body([event()]).replace('{"count"', '{"extra":1,"count"')],
    ['a missing eventId', body([event()]).replace(/"eventId":"[^"]+",/, '')],
    ['a PURGED with an atomId', body([event({ eventType: 'PURGED' })])],
    ['an unknown event type', body([event()]).replace('"EDITED"', '"RENAMED"')],
    ['a timestamp without milliseconds', body([event({ eventTimestamp: '2026-11-27T09:14:03Z' })])],
    ['a timestamp with an offset', body([event({ eventTimestamp: '2026-11-27T09:14:03.120+01:00' })])],
    ['an assetUuid that is not a UUID', body([event({ assetUuid: 'asset-7' })])],
    ['an assetId as a string', body([event()]).replace('"assetId":7', '"assetId":"7"')],
    ['no events', serializeBody([], '2026-11-27T09:15:00.004Z')],
    ['a count that differs from the events', body([event(), event()]).replace('"count":2', '"count":1')],
    ['101 events', body(Array.from({ length: 101 }, () => event()))],
  ])('refuses a body with %s', (_name, text) => {
    expect(payloadSchemaErrors(text)).not.toEqual([]);
  });
});
