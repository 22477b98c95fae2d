import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { claimPayloads } from '../../src/delivery/attempt-store.js';
import { settleAttempt } from '../../src/delivery/deliver.js';
import { expireWaiting } from '../../src/delivery/recover.js';
import { receiverConfig } from '../helpers/config.js';
import { insertPayloads, PAYLOADS_WITH_SLOTS, testDelivery, type TestDelivery } from '../helpers/delivery.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Several `run` hosts share one database, and their clocks differ. Whatever
// each host's own clock says, the claim, the retry and the expiry of a
// payload are decided by the database's (asset_webhooks.now()): two hosts
// cannot disagree about a payload's window.

const db = useTestDatabase();
let deliveries: TestDelivery[] = [];

beforeEach(async () => {
  await resetData(db.pool);
});
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(deliveries.map((delivery) => delivery.close()));
  deliveries = [];
});

const DAY_MS = 86_400_000;
const unavailable = { durationMs: 5, statusCode: 503, errorClass: null, errorMessage: null, responseExcerpt: null };

/** This process's own clock (Date) `offsetMs` away from the database's, as another host's would be. */
function hostClock(offsetMs: number): void {
  vi.useRealTimers();
  const real = Date.now();
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(real + offsetMs);
}

describe('hosts whose clocks differ', () => {
  it("claim, retry and expire payloads by the database's clock alone", async () => {
    const delivery = await testDelivery(
      db.pool,
      receiverConfig([{ id: 'shop', url: 'http://127.0.0.1:9/hook', concurrency: 2 }], {
        retry: { delaysSeconds: [30], deadLetterAfterSeconds: 60 },
      }),
    );
    deliveries.push(delivery);
    const [fresh] = await insertPayloads(db.pool, 'shop', 1);
    const [old] = await insertPayloads(db.pool, 'shop', 1);
    // The old one's window is over by the database's clock, the fresh one's is not.
    await db.pool.query(
      "update asset_webhooks.payloads set series_started_at = clock_timestamp() - interval '2 minutes' where payload_id = $1",
      [old],
    );

    // A host a day ahead: by its clock both windows are over. It claims the fresh one and retries its failure.
    hostClock(DAY_MS);
    const claimed = await claimPayloads(db.pool, {
      now: new Date(),
      max: 10,
      share: 10,
      after: null,
      expireAfterSeconds: 60,
    });
    expect(claimed.map((payload) => payload.payloadId)).toEqual([fresh]);
    const { result } = await settleAttempt(delivery.context, claimed[0]!, unavailable, 'retryable');
    expect(result.outcome).toBe('retry');

    // A host a day behind: by its clock no window is over. It expires the old one, not the fresh one's retry.
    hostClock(-DAY_MS);
    expect(await expireWaiting(delivery.context)).toBe(1);

    vi.useRealTimers();
    const { rows } = await db.pool.query<{
      payload_id: number;
      status: string;
      dead_letter_reason: string | null;
      retry_in_s: number | null;
    }>(
      `select p.payload_id, p.status, p.dead_letter_reason,
              round(extract(epoch from f.next_attempt_at - asset_webhooks.now()))::int as retry_in_s
       from ${PAYLOADS_WITH_SLOTS} order by p.payload_id`,
    );
    expect(rows).toEqual([
      { payload_id: fresh, status: 'pending', dead_letter_reason: null, retry_in_s: 30 },
      { payload_id: old, status: 'dead_lettered', dead_letter_reason: 'expired', retry_in_s: null },
    ]);
  });
});
