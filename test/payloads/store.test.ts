import { describe, expect, it } from 'vitest';
import { chunkStatements } from '../../src/coalesce/persist.js';
import { Packer, type Batch } from '../../src/payloads/pack.js';
import { NOTHING_SEEN } from '../../src/payloads/seen-row.js';
import { serializeBody, serializeEvent } from '../../src/payloads/serialize.js';
import { assignPayloadIds } from '../../src/payloads/ids.js';
import { PAYLOAD_COLUMNS, PAYLOADS_PER_STATEMENT, writePayloads } from '../../src/payloads/store.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The one writer of payload rows, for coalescing runs and backfills: every
// column of every kind of row (pending, open, too_large, sharing a body) must
// land where the payloads table expects it.

const db = useTestDatabase();
const TIMESTAMP = '2026-01-02T03:04:05.678Z';

const eventId = (n: number): string => `00000000-0000-7000-8000-${n.toString(16).padStart(12, '0')}`;
const json = (n: number, padding = 0): string =>
  serializeEvent({
    atomId: null,
    eventId: eventId(n),
    eventTimestamp: TIMESTAMP,
    assetId: String(n),
    assetUuid: 'x'.repeat(padding),
    eventType: 'EDITED',
  });

interface StoredPayload {
  payload_id: string;
  webhook_id: string;
  run_id: string | null;
  status: string;
  body: string;
  body_of: string | null;
  byte_size: number;
  event_count: number;
  event_ids: string[];
  dead_letter_reason: string | null;
  dead_lettered: boolean;
}

async function stored(batch: Batch): Promise<StoredPayload> {
  const { rows } = await db.pool.query<StoredPayload>(
    `select payload_id::text, webhook_id, run_id::text, status, body, body_of::text, byte_size, event_count, event_ids::text[] as event_ids,
            dead_letter_reason, dead_lettered_at is not null as dead_lettered
     from asset_webhooks.payloads where payload_id = $1`,
    [batch.payloadId],
  );
  return rows[0]!;
}

async function write(runId: number | null, batches: readonly Batch[]): Promise<void> {
  const client = await db.pool.connect();
  try {
    await assignPayloadIds(client, batches);
    await writePayloads(client, runId, batches, TIMESTAMP);
  } finally {
    client.release();
  }
}

describe('writePayloads', () => {
  it('writes a sealed batch pending with its body, and a second webhook packing the same events naming that body', async () => {
    const limits = { batchSize: 2, maxPayloadBytes: 10_000 };
    const [first, second] = ['w-one', 'w-two'].map((webhook) => {
      const packer = new Packer(webhook, limits);
      packer.add(eventId(1), json(1));
      return packer.add(eventId(2), json(2));
    });
    await write(41, [first!, second!]);
    const body = serializeBody([json(1), json(2)], TIMESTAMP);
    expect(await stored(first!)).toEqual({
      payload_id: String(first!.payloadId),
      webhook_id: 'w-one',
      run_id: '41',
      status: 'pending',
      body,
      body_of: null,
      byte_size: Buffer.byteLength(body),
      event_count: 2,
      event_ids: [eventId(1), eventId(2)],
      dead_letter_reason: null,
      dead_lettered: false,
    });
    expect(await stored(second!)).toEqual({
      ...(await stored(first!)),
      payload_id: String(second!.payloadId),
      webhook_id: 'w-two',
      body: '',
      body_of: String(first!.payloadId),
    });
  });

  it('writes an open batch without its events, then sealed with them over the same row', async () => {
    const packer = new Packer('w-open', { batchSize: 10, maxPayloadBytes: 10_000 });
    const batch = packer.add(eventId(3), json(3));
    await write(42, packer.drain());
    expect(await stored(batch)).toMatchObject({
      status: 'open',
      body: '',
      body_of: null,
      byte_size: 0,
      event_count: 0,
      event_ids: [],
      dead_letter_reason: null,
    });
    packer.add(eventId(4), json(4));
    packer.finish();
    await write(42, packer.drain());
    const body = serializeBody([json(3), json(4)], TIMESTAMP);
    expect(await stored(batch)).toMatchObject({
      run_id: '42',
      status: 'pending',
      body,
      byte_size: Buffer.byteLength(body),
      event_count: 2,
      event_ids: [eventId(3), eventId(4)],
    });
  });

  it('dead-letters a batch of one event over maxPayloadBytes as too_large, and never shares its body', async () => {
    const limits = { batchSize: 10, maxPayloadBytes: 400 };
    const [first, second] = ['w-big-one', 'w-big-two'].map((webhook) =>
      new Packer(webhook, limits).add(eventId(5), json(5, 500)),
    );
    expect(first!.tooLarge).toBe(true);
    await write(null, [first!, second!]);
    const body = serializeBody([json(5, 500)], TIMESTAMP);
    for (const batch of [first!, second!]) {
      expect(await stored(batch)).toMatchObject({
        run_id: null,
        status: 'dead_lettered',
        body,
        body_of: null,
        byte_size: Buffer.byteLength(body),
        event_count: 1,
        event_ids: [eventId(5)],
        dead_letter_reason: 'too_large',
        dead_lettered: true,
      });
    }
  });

  it('writes a backfill batch with no coalescing run', async () => {
    const packer = new Packer('w-backfill', { batchSize: 1, maxPayloadBytes: 10_000 });
    const batch = packer.add(eventId(6), json(6));
    await write(null, [batch]);
    expect(await stored(batch)).toMatchObject({ run_id: null, status: 'pending', event_ids: [eventId(6)] });
  });
});

it('keeps a chunk statement with a full group of payload rows under the bind parameter limit', () => {
  const packer = new Packer('w-many', { batchSize: 1, maxPayloadBytes: 10_000 });
  const batches = Array.from({ length: PAYLOADS_PER_STATEMENT }, (_, n) => packer.add(eventId(n), json(n)));
  batches.forEach((batch, n) => (batch.payloadId = n + 1));
  const seqs = [1];
  const statements = chunkStatements(
    1,
    1,
    {
      seqs,
      eventIds: [eventId(1)],
      atomIds: [null],
      assetUuids: [null],
      collapsedInto: [null],
      seen: [NOTHING_SEEN],
      deliveredTo: [[1]],
      payloadIds: [[1]],
      unmatchedTo: [[]],
      inTrash: [false],
      raisedTimestamps: [null],
    },
    batches,
    [],
    TIMESTAMP,
  );
  expect(statements).toHaveLength(1);
  expect(statements[0]!.values.length).toBeGreaterThanOrEqual(PAYLOADS_PER_STATEMENT * PAYLOAD_COLUMNS.length);
  expect(statements[0]!.values.length).toBeLessThanOrEqual(65_535);
});
