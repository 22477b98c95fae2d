import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { PayloadEvent } from '../../src/payloads/serialize.js';

/**
 * schema/payload.schema.json, the body receivers are promised
 * (docs/receiving.md), compiled once per test file. Every body a test
 * receiver gets is checked against it (test/setup/payload-schema.ts fails the
 * test that received one that does not validate), so every end-to-end test
 * doubles as a check of the schema and of the serializer.
 */
const schema: unknown = JSON.parse(readFileSync(new URL('../../schema/payload.schema.json', import.meta.url), 'utf8'));
const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats.default(ajv);
const validate = ajv.compile(schema as object);

const violations: string[] = [];

/** The schema errors of one received body, or [] when it validates (and its count equals its events' length). */
export function payloadSchemaErrors(body: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (error) {
    return [`not JSON: ${(error as Error).message}`];
  }
  const errors = validate(parsed)
    ? []
    : (validate.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message ?? ''}`);
  const payload = parsed as { count?: unknown; events?: unknown };
  if (Array.isArray(payload.events) && payload.count !== payload.events.length) {
    errors.push(`/count is ${String(payload.count)}, expected the number of events, ${payload.events.length}`);
  }
  return errors;
}

/** Checks a body a test receiver got; a violation is kept until takePayloadSchemaViolations(). */
export function checkReceivedBody(body: string): void {
  const errors = payloadSchemaErrors(body);
  if (errors.length > 0) violations.push(`${errors.join('; ')} in ${body.slice(0, 300)}`);
}

/** The violations seen since the last call, and forgets them. */
export function takePayloadSchemaViolations(): string[] {
  return violations.splice(0);
}

/** A body of the shape the service sends, one EDITED event, for tests that write a payload row themselves. */
export function oneEventBody(): string {
  const now = new Date().toISOString();
  const event = {
    atomId: 1,
    eventId: randomUUID(),
    eventTimestamp: now,
    assetId: 1,
    assetUuid: randomUUID(),
    eventType: 'EDITED',
  };
  return JSON.stringify({ count: 1, events: [event], webhookTimestamp: now });
}

/** One EDITED event with fixed ids, for tests of the body's shape; fields can be overridden. */
export function sampleEvent(overrides: Partial<PayloadEvent> = {}): PayloadEvent {
  return {
    atomId: '12',
    eventId: '0b7f3c1e-6a4d-4f0e-9a51-3f2d8c4b7e10',
    eventTimestamp: '2026-11-27T09:14:03.120Z',
    assetId: '7',
    assetUuid: '5d1c2b9a-8f3e-4c6d-b1a7-2e9f0c3d4a58',
    eventType: 'EDITED',
    ...overrides,
  };
}
