import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { beforeEach, describe, expect, it } from 'vitest';
import { coalesce } from '../../src/coalesce/run.js';
import { claimPayloads, settlePayloads, type ClaimedPayload } from '../../src/delivery/attempt-store.js';
import { signedHeaders } from '../../src/delivery/http/signing.js';
import { redeliver } from '../../src/investigate/dead-letters.js';
import { bodyBytes, serializeBody, serializeEvent, type PayloadEvent } from '../../src/payload/serialize.js';
import { openWebhook, registerWebhooks, resetData, silentLogger } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import type { EventType } from '../../src/interfaces.js';

// A payload stores its events' ids; asset_webhooks.payload_body assembles the
// body from their rows in asset_webhooks.events at every claim. It must be
// byte for byte what the TypeScript serializer makes of the same values (the
// coalescer sizes payloads with it), and every attempt of a payload must send
// the same bytes.

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
});

const BIGINT_MIN = -(2n ** 63n);
const BIGINT_MAX = 2n ** 63n - 1n;

interface StoredEvent {
  readonly eventId: string;
  /** Microseconds since the epoch: PostgreSQL keeps microseconds, the body shows milliseconds. */
  readonly occurredMicros: bigint;
  readonly eventType: string;
  readonly assetId: bigint;
  readonly assetUuid: string | null;
  readonly atomId: bigint | null;
}

/** Years 1000 to 9999: the ISO form with a four-digit year, as every capture time has. */
const micros = fc.bigInt(-30_610_224_000_000_000n, 253_402_300_799_999_999n);
const eventType = fc.oneof(
  fc.constantFrom('CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'),
  // events.event_type is text: whatever it holds is escaped as JSON.stringify escapes it.
  fc.string({ unit: 'grapheme', maxLength: 8 }).filter((s) => !s.includes('\u0000')),
  fc.constantFrom('a"b\\c', '\n\t\r\b\f', '\u0001\u001f\u007f', '\u2028\u2029', 'é😀', '/</script>'),
);
const storedEvent: fc.Arbitrary<StoredEvent> = fc.record({
  eventId: fc.uuid(),
  occurredMicros: micros,
  eventType,
  assetId: fc.oneof(fc.bigInt(BIGINT_MIN, BIGINT_MAX), fc.constantFrom(0n, 1n, 2n ** 53n + 1n, BIGINT_MAX, BIGINT_MIN)),
  assetUuid: fc.option(fc.uuid(), { nil: null }),
  atomId: fc.option(fc.oneof(fc.bigInt(BIGINT_MIN, BIGINT_MAX), fc.constantFrom(9007199254740993n, -1n)), {
    nil: null,
  }),
});

/** The timestamp text PostgreSQL is given: microseconds, UTC. */
function pgTimestamp(us: bigint): string {
  const ms = us / 1000n - (us % 1000n < 0n ? 1n : 0n);
  const rest = us - ms * 1000n;
  return `${new Date(Number(ms)).toISOString().slice(0, 23)}${String(rest).padStart(3, '0')}+00`;
}

/** The event as the coalescer serializes it: eventTimestamp is the capture time truncated to milliseconds. */
function payloadEvent(event: StoredEvent): PayloadEvent {
  const ms = event.occurredMicros / 1000n - (event.occurredMicros % 1000n < 0n ? 1n : 0n);
  return {
    atomId: event.atomId === null ? null : String(event.atomId),
    eventId: event.eventId,
    eventTimestamp: new Date(Number(ms)).toISOString(),
    assetId: String(event.assetId),
    assetUuid: event.assetUuid ?? '',
    eventType: event.eventType as EventType,
  };
}

async function assembled(events: readonly StoredEvent[], order: readonly number[], webhookTimestamp: string) {
  await db.pool.query('truncate asset_webhooks.events, asset_webhooks.payloads cascade');
  await db.pool.query(
    `insert into asset_webhooks.events (event_id, occurred_at, event_type, asset_id, asset_uuid, atom_id, coalesced_at)
     select * , now() from unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::bigint[], $5::uuid[], $6::bigint[])`,
    [
      events.map((e) => e.eventId),
      events.map((e) => pgTimestamp(e.occurredMicros)),
      events.map((e) => e.eventType),
      events.map((e) => String(e.assetId)),
      events.map((e) => e.assetUuid),
      events.map((e) => (e.atomId === null ? null : String(e.atomId))),
    ],
  );
  const ids = order.map((i) => events[i]!.eventId);
  const {
    rows: [row],
  } = await db.pool.query<{ body: string }>(
    `insert into asset_webhooks.payloads (webhook_id, status, webhook_timestamp, byte_size, event_count, event_ids)
     values ('crm', 'pending', $1, 0, $3, $2::uuid[])
     returning asset_webhooks.payload_body(payloads) as body`,
    [webhookTimestamp, ids, ids.length],
  );
  return row!.body;
}

describe('asset_webhooks.payload_body', () => {
  it('assembles exactly what serializeBody(serializeEvent(...)) makes of the same values, in the order of event_ids', async () => {
    const unique = fc.uniqueArray(storedEvent, { selector: (e) => e.eventId, maxLength: 6 });
    await fc.assert(
      fc.asyncProperty(
        unique.chain((events) =>
          fc.tuple(
            fc.constant(events),
            fc.shuffledSubarray(
              events.map((_, i) => i),
              { minLength: events.length },
            ),
            fc.date({
              min: new Date('1970-01-01T00:00:00.000Z'),
              max: new Date('9999-12-31T23:59:59.999Z'),
              noInvalidDate: true,
            }),
          ),
        ),
        async ([events, order, at]) => {
          const webhookTimestamp = at.toISOString();
          const body = await assembled(events, order, webhookTimestamp);
          const serialized = order.map((i) => serializeEvent(payloadEvent(events[i]!)));
          expect(body).toBe(serializeBody(serialized, webhookTimestamp));
          // The size the coalescer records for it.
          const eventBytes = serialized.reduce((sum, json) => sum + Buffer.byteLength(json), 0);
          expect(Buffer.byteLength(body)).toBe(bodyBytes(serialized.length, eventBytes));
          // Ids beyond 2^53 keep their digits.
          for (const i of order) expect(body).toContain(`"assetId":${events[i]!.assetId}`);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('writes the edge cases as receivers read them', async () => {
    const events: StoredEvent[] = [
      {
        eventId: '0190a5b4-0000-7000-8000-000000000001',
        occurredMicros: 1_735_787_045_678_999n, // 2025-01-02T03:04:05.678999Z: milliseconds are truncated, not rounded
        eventType: 'PURGED',
        assetId: BIGINT_MAX,
        assetUuid: null,
        atomId: null,
      },
      {
        eventId: '0190a5b4-0000-7000-8000-000000000002',
        occurredMicros: 1_735_787_045_000_000n,
        eventType: 'EDITED',
        assetId: 9007199254740993n,
        assetUuid: '5f0e3a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b',
        atomId: -7n,
      },
    ];
    const body = await assembled(events, [1, 0], '2026-06-01T12:00:00.120Z');
    expect(body).toBe(
      '{"count":2,"events":[' +
        '{"atomId":-7,"eventId":"0190a5b4-0000-7000-8000-000000000002","eventTimestamp":"2025-01-02T03:04:05.000Z",' +
        '"assetId":9007199254740993,"assetUuid":"5f0e3a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b","eventType":"EDITED"},' +
        '{"atomId":null,"eventId":"0190a5b4-0000-7000-8000-000000000001","eventTimestamp":"2025-01-02T03:04:05.678Z",' +
        '"assetId":9223372036854775807,"assetUuid":"","eventType":"PURGED"}' +
        '],"webhookTimestamp":"2026-06-01T12:00:00.120Z"}',
    );
    expect(await assembled([], [], '2026-06-01T12:00:00.000Z')).toBe(
      '{"count":0,"events":[],"webhookTimestamp":"2026-06-01T12:00:00.000Z"}',
    );
  });
});

describe('every attempt of a payload', () => {
  const claim = (now: Date): Promise<ClaimedPayload[]> =>
    claimPayloads(db.pool, { now, max: 10, share: 10, after: null, expireAfterSeconds: 86_400 });
  const settle = async (payload: ClaimedPayload, outcome: 'retry' | 'rejected', at: Date, retryAt: Date | null) => {
    const [settled] = await settlePayloads(db.pool, [
      {
        payload,
        attemptNo: payload.attemptNo,
        result: {
          durationMs: 1,
          statusCode: outcome === 'retry' ? 503 : 400,
          errorClass: null,
          errorMessage: null,
          responseExcerpt: null,
          outcome,
        },
        at,
        retryAt,
        receiverFailed: null,
        holdWebhookUntil: null,
      },
    ]);
    expect(settled!.applied).toBe(true);
  };

  it('sends the same bytes, signed over those bytes: the first try, a retry, a redelivery and a redelivery to another webhook', async () => {
    const crm = openWebhook('crm');
    const shop = openWebhook('shop');
    await registerWebhooks(db.pool, [crm, shop]);
    // Ids beyond 2^53, an asset without an atom, and one purged before
    // coalescing (its CREATED is excluded, its PURGED carries no atom).
    await db.pool.query(
      `insert into assets (asset_id, latest_atom_id) values (9007199254740993, 9223372036854775806), (12, null), (13, 5)`,
    );
    await db.pool.query('update assets set title = $1 where asset_id = 12', ['t"itle']);
    await db.pool.query('delete from assets where asset_id = 13');
    await coalesce({ pool: db.pool, webhooks: [crm], maxPayloadBytes: 16 * 1024 * 1024, logger: silentLogger });
    await db.pool.query("update asset_webhooks.webhooks set enabled = false where webhook_id = 'shop'");

    let now = new Date();
    const later = (seconds: number): Date => (now = new Date(now.getTime() + seconds * 1000));
    const [first] = await claim(now);
    expect(first).toMatchObject({ webhookId: 'crm', attemptNo: 1 });
    const bodies = [first!.body];
    await settle(first!, 'retry', now, later(60));
    const [retry] = await claim(now);
    expect(retry).toMatchObject({ payloadId: first!.payloadId, attemptNo: 2 });
    bodies.push(retry!.body);
    await settle(retry!, 'rejected', now, null);

    await redeliver(db.pool, first!.payloadId, 'test');
    const [again] = await claim(later(1));
    expect(again).toMatchObject({ payloadId: first!.payloadId, series: 2, attemptNo: 1 });
    bodies.push(again!.body);
    await settle(again!, 'rejected', now, null);

    await db.pool.query("update asset_webhooks.webhooks set enabled = true where webhook_id = 'shop'");
    await redeliver(db.pool, first!.payloadId, 'test', 'shop');
    const [moved] = await claim(later(1));
    expect(moved).toMatchObject({ payloadId: first!.payloadId, webhookId: 'shop', series: 3, attemptNo: 1 });
    bodies.push(moved!.body);

    expect(new Set(bodies).size).toBe(1);
    const body = bodies[0]!;
    const parsed = JSON.parse(body) as { count: number; events: Array<Record<string, unknown>> };
    expect(parsed.count).toBe(4);
    expect(body).toContain('"assetId":9007199254740993,');
    expect(body).toContain('"atomId":9223372036854775806,');
    expect(parsed.events.map((event) => [event.eventType, event.atomId])).toEqual([
      ['CREATED', 9223372036854775806],
      ['CREATED', null],
      ['EDITED', null],
      ['PURGED', null],
    ]);
    const {
      rows: [stored],
    } = await db.pool.query<{ byte_size: number }>(
      'select byte_size from asset_webhooks.payloads where payload_id = $1',
      [first!.payloadId],
    );
    expect(stored!.byte_size).toBe(Buffer.byteLength(body));

    // The signature covers exactly these bytes.
    const secret = `whsec_${Buffer.from('a signing key of 24 bytes').toString('base64')}`;
    const headers = await signedHeaders(
      { resolve: async () => secret, invalidate: () => {} } as unknown as Parameters<typeof signedHeaders>[0],
      'signing',
      first!.payloadId,
      body,
    );
    expect(() => new Webhook(secret).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow();
  });
});
