import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/interfaces.js';
import {
  bodyBytes,
  isoTimestamp,
  serializeBody,
  serializeEvent,
  type PayloadEvent,
} from '../../src/payloads/serialize.js';
import { payloadSchemaErrors, sampleEvent } from '../helpers/payload-schema.js';

// The JSON body receivers are promised (spec section 5, schema/payload.schema.json):
// exactly {"count", "events", "webhookTimestamp"} and, per event, exactly the six
// fields in the contract's order; ids are JSON numbers with PostgreSQL's digits.

const TIMESTAMP = '2026-11-27T09:15:00.004Z';
const event = sampleEvent;

describe('serializeEvent', () => {
  it('writes exactly the six fields, in the contract order', () => {
    expect(serializeEvent(event())).toBe(
      '{"atomId":12,"eventId":"0b7f3c1e-6a4d-4f0e-9a51-3f2d8c4b7e10","eventTimestamp":"2026-11-27T09:14:03.120Z",' +
        '"assetId":7,"assetUuid":"5d1c2b9a-8f3e-4c6d-b1a7-2e9f0c3d4a58","eventType":"EDITED"}',
    );
  });

  it('writes a missing atomId (PURGED) as null', () => {
    const parsed = JSON.parse(serializeEvent(event({ atomId: null, eventType: 'PURGED' }))) as Record<string, unknown>;
    expect(parsed.atomId).toBeNull();
    expect(Object.keys(parsed)).toEqual(['atomId', 'eventId', 'eventTimestamp', 'assetId', 'assetUuid', 'eventType']);
  });

  it('keeps every digit of ids beyond 2^53', () => {
    const big = '9223372036854775807';
    const text = serializeEvent(event({ atomId: big, assetId: '9007199254740993' }));
    expect(text).toContain(`"atomId":${big},`);
    expect(text).toContain('"assetId":9007199254740993,');
    expect(() => JSON.parse(text) as unknown).not.toThrow();
  });

  it('escapes any string so the event stays JSON', () => {
    const awkward = 'quote " backslash \\ newline \n tab \t nul \u0000 line-sep \u2028 é 😀';
    const parsed = JSON.parse(serializeEvent(event({ eventId: awkward }))) as PayloadEvent;
    expect(parsed.eventId).toBe(awkward);
  });
});

describe('serializeBody', () => {
  it('writes count, events and webhookTimestamp, in that order, count equal to the events', () => {
    const events = [event(), event({ eventType: 'CREATED' })].map(serializeEvent);
    const text = serializeBody(events, TIMESTAMP);
    expect(text).toBe(`{"count":2,"events":[${events.join(',')}],"webhookTimestamp":"${TIMESTAMP}"}`);
    const parsed = JSON.parse(text) as { count: number; events: unknown[] };
    expect(Object.keys(parsed)).toEqual(['count', 'events', 'webhookTimestamp']);
    expect(parsed.count).toBe(parsed.events.length);
  });

  it.each([1, 2, 99, 100])('makes a body of %i events that the payload schema accepts', (count) => {
    const events = Array.from({ length: count }, (_, i) =>
      serializeEvent(
        event({
          eventType: EVENT_TYPES[i % EVENT_TYPES.length]!,
          atomId: EVENT_TYPES[i % EVENT_TYPES.length] === 'PURGED' ? null : String(i + 1),
          assetId: String(2n ** 62n + BigInt(i)),
        }),
      ),
    );
    expect(payloadSchemaErrors(serializeBody(events, TIMESTAMP))).toEqual([]);
  });

  it('makes a body the schema accepts whatever the events, the timestamp from isoTimestamp', () => {
    const eventArb = fc
      .record({
        atomId: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String),
        eventId: fc.uuid(),
        eventTimestamp: fc.date({ min: new Date(0), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }),
        assetId: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String),
        assetUuid: fc.uuid(),
        eventType: fc.constantFrom(...EVENT_TYPES),
      })
      .map((e): PayloadEvent => ({
        ...e,
        atomId: e.eventType === 'PURGED' ? null : e.atomId,
        eventTimestamp: isoTimestamp(e.eventTimestamp),
      }));
    fc.assert(
      fc.property(
        fc.array(eventArb, { minLength: 1, maxLength: 100 }),
        fc.date({ noInvalidDate: true, min: new Date(0), max: new Date('9999-12-31T23:59:59.999Z') }),
        (events, at) => {
          const text = serializeBody(events.map(serializeEvent), isoTimestamp(at));
          expect(payloadSchemaErrors(text)).toEqual([]);
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe('isoTimestamp', () => {
  it('is UTC with milliseconds and Z, 24 characters', () => {
    expect(isoTimestamp(new Date(Date.UTC(2026, 10, 27, 9, 14, 3, 5)))).toBe('2026-11-27T09:14:03.005Z');
    expect(isoTimestamp(new Date(0))).toHaveLength(24);
  });
});

describe('bodyBytes', () => {
  const sizes = (events: readonly string[]): number => events.reduce((sum, e) => sum + Buffer.byteLength(e), 0);

  it.each([0, 1, 2, 9, 10, 11, 99, 100, 101])('is the UTF-8 size of a body of %i events', (count) => {
    const events = Array.from({ length: count }, (_, i) => serializeEvent(event({ assetId: String(i + 1) })));
    expect(bodyBytes(count, sizes(events))).toBe(Buffer.byteLength(serializeBody(events, TIMESTAMP)));
  });

  it('counts the bytes of multi-byte characters, not UTF-16 units', () => {
    const events = ['"é"', '"€€"', '"😀"'];
    const text = serializeBody(events, TIMESTAMP);
    expect(Buffer.byteLength(text)).toBeGreaterThan(text.length);
    expect(bodyBytes(events.length, sizes(events))).toBe(Buffer.byteLength(text));
  });

  it('equals the size of the body serializeBody makes, for any events', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.string({ unit: 'grapheme' }).map((s) => JSON.stringify(s)),
          { maxLength: 120 },
        ),
        (events) => {
          expect(bodyBytes(events.length, sizes(events))).toBe(Buffer.byteLength(serializeBody(events, TIMESTAMP)));
        },
      ),
    );
  });
});
