import { afterEach, beforeEach, expect, it } from 'vitest';
import { claimDue, type ClaimedPayload } from '../../src/delivery/attempt-store.js';
import { settleAttempt } from '../../src/delivery/deliver.js';
import { receiverConfig } from '../helpers/config.js';
import { ClockPools } from '../helpers/db-clock.js';
import { insertPayloads, testDelivery, type TestDelivery } from '../helpers/delivery.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * rateLimit in the claim and the completer, decided at exact instants of a
 * stopped database clock: the bucket's tokens, the webhooks it holds and the
 * others it does not, the wake-up it asks for, and the adaptive rate.
 */

const db = useTestDatabase();
let delivery: TestDelivery | undefined;
let clocks: ClockPools;

beforeEach(async () => {
  await resetData(db.pool);
  clocks = new ClockPools(db.url);
});
afterEach(async () => {
  await delivery?.close();
  await clocks.close();
});

/** A claim of up to 100 payloads at `at` on the stopped clock. */
function claimAt(at: Date) {
  return claimDue(clocks.at(at), { now: at, max: 100, share: 100, after: null, expireAfterSeconds: 3600 });
}

const later = (from: Date, ms: number) => new Date(from.getTime() + ms);
const idsOf = (claimed: readonly ClaimedPayload[], webhookId: string) =>
  claimed.filter((payload) => payload.webhookId === webhookId).map((payload) => payload.payloadId);

async function bucket(): Promise<{ rate_current: number; rate_held_since: Date | null }> {
  const { rows } = await db.pool.query<{ rate_current: number; rate_held_since: Date | null }>(
    "select rate_current, rate_held_since from asset_webhooks.webhook_queues where webhook_id = 'limited'",
  );
  return rows[0]!;
}

it('takes only the tokens there are, passes the held webhook over while claiming the others, and says when its next token comes', async () => {
  delivery = await testDelivery(
    db.pool,
    receiverConfig([
      { id: 'limited', url: 'http://127.0.0.1:9/a', concurrency: 10, rateLimit: { perSecond: 4, burst: 2 } },
      { id: 'free', url: 'http://127.0.0.1:9/b', concurrency: 10 },
    ]),
  );
  const limited = await insertPayloads(db.pool, 'limited', 10);
  const free = await insertPayloads(db.pool, 'free', 10);
  const t0 = later(new Date(), 60_000);

  // A full bucket: its burst of 2, in order; the unlimited webhook gets all it may.
  let claim = await claimAt(t0);
  expect(idsOf(claim.claimed, 'limited')).toEqual(limited.slice(0, 2));
  expect(idsOf(claim.claimed, 'free')).toEqual(free);
  // Empty now: the next token in 1/4 s.
  expect(claim.wakeInMs).toBe(250);
  expect((await bucket()).rate_held_since).toEqual(t0);

  claim = await claimAt(later(t0, 100));
  expect(claim.claimed).toEqual([]);
  expect(claim.wakeInMs).toBe(150);

  // Half a second: 2 tokens.
  claim = await claimAt(later(t0, 500));
  expect(idsOf(claim.claimed, 'limited')).toEqual(limited.slice(2, 4));
  // A long quiet spell fills the bucket to its burst, no more.
  claim = await claimAt(later(t0, 60_000));
  expect(idsOf(claim.claimed, 'limited')).toEqual(limited.slice(4, 6));
  const { rows } = await db.pool.query<{ attempts: number }>(
    "select count(*)::int as attempts from asset_webhooks.attempts a join asset_webhooks.payloads p using (payload_id) where p.webhook_id = 'limited'",
  );
  expect(rows[0]!.attempts).toBe(6);
});

it('adaptive: a 429 halves the rate once a second and empties the bucket; a second of successes regains a tenth of perSecond', async () => {
  delivery = await testDelivery(
    db.pool,
    receiverConfig(
      [
        {
          id: 'limited',
          url: 'http://127.0.0.1:9/a',
          concurrency: 10,
          rateLimit: { perSecond: 20, burst: 4, adaptive: true },
        },
      ],
      { retry: { delaysSeconds: [1, 1, 1], retryStatusCodes: [429] } },
    ),
  );
  await insertPayloads(db.pool, 'limited', 10);
  const t0 = later(new Date(), 60_000);
  const { claimed } = await claimAt(t0);
  expect(claimed).toHaveLength(4);
  const answer = (statusCode: number) => ({
    durationMs: 5,
    statusCode,
    errorClass: null,
    errorMessage: null,
    responseExcerpt: null,
  });
  const settleAt = (at: Date, payload: ClaimedPayload, statusCode: number) =>
    settleAttempt(
      clocks.context(delivery!.context, at.getTime() - Date.now()),
      payload,
      answer(statusCode),
      statusCode === 200 ? 'delivered' : 'retryable',
    );

  await settleAt(t0, claimed[0]!, 429);
  expect((await bucket()).rate_current).toBe(10);
  // Answers to requests sent before the halving: no second halving within the second.
  await settleAt(later(t0, 200), claimed[1]!, 503);
  expect((await bucket()).rate_current).toBe(10);
  // Nothing to claim: the halving emptied the bucket.
  expect((await claimAt(later(t0, 50))).claimed).toEqual([]);
  // Successes a second after the change regain 2/s (a tenth of 20).
  await settleAt(later(t0, 1500), claimed[2]!, 200);
  expect((await bucket()).rate_current).toBe(12);
  await settleAt(later(t0, 1700), claimed[3]!, 200);
  expect((await bucket()).rate_current).toBe(12);
});
