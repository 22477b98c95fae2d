import type { DecimalId, SentEventType } from '../interfaces.js';

/** One event object of a payload: exactly these six fields, the receivers' contract. */
export interface PayloadEvent {
  readonly atomId: DecimalId | null;
  readonly eventId: string;
  readonly eventTimestamp: string;
  readonly assetId: DecimalId;
  readonly assetUuid: string;
  readonly eventType: SentEventType;
}

/** ISO-8601 UTC with milliseconds and Z. */
export function isoTimestamp(date: Date): string {
  return date.toISOString();
}

/**
 * The JSON of one event, keys in the contract's order. assetId and atomId are
 * JSON numbers written with the digits PostgreSQL gave (a bigint's text is
 * always a valid JSON number), so an id beyond 2^53 reaches the receiver as
 * stored; the strings are escaped by JSON.stringify.
 */
export function serializeEvent(event: PayloadEvent): string {
  return (
    `{"atomId":${event.atomId ?? 'null'},"eventId":${JSON.stringify(event.eventId)},` +
    `"eventTimestamp":${JSON.stringify(event.eventTimestamp)},"assetId":${event.assetId},` +
    `"assetUuid":${JSON.stringify(event.assetUuid)},"eventType":${JSON.stringify(event.eventType)}}`
  );
}

/**
 * The body of a payload from already serialized events: exactly
 * {"count", "events", "webhookTimestamp"}, count equal to the number of events.
 */
export function serializeBody(serializedEvents: readonly string[], webhookTimestamp: string): string {
  return `{"count":${serializedEvents.length},"events":[${serializedEvents.join(',')}],"webhookTimestamp":${JSON.stringify(webhookTimestamp)}}`;
}

/**
 * The size in bytes of the body that serializeBody would produce for `count`
 * events whose serialized sizes add up to `eventBytes`. A timestamp is always 24
 * characters (ISO with milliseconds and Z).
 */
export function bodyBytes(count: number, eventBytes: number): number {
  const envelope = '{"count":,"events":[],"webhookTimestamp":""}'.length + 24;
  return envelope + String(count).length + eventBytes + Math.max(0, count - 1);
}
