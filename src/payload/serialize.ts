import type { EventType } from '../interfaces.js';

/** One event object of a payload, exactly the six fields of CONTRACT section 5. */
export interface PayloadEvent {
  readonly atomId: number | null;
  readonly eventId: string;
  readonly eventTimestamp: string;
  readonly assetId: number;
  readonly assetUuid: string;
  readonly eventType: EventType;
}

/** ISO-8601 UTC with milliseconds and Z. */
export function isoTimestamp(date: Date): string {
  return date.toISOString();
}

/** The JSON of one event, keys in the contract's order. */
export function serializeEvent(event: PayloadEvent): string {
  return JSON.stringify({
    atomId: event.atomId,
    eventId: event.eventId,
    eventTimestamp: event.eventTimestamp,
    assetId: event.assetId,
    assetUuid: event.assetUuid,
    eventType: event.eventType,
  });
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
