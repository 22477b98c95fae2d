import { afterEach, beforeEach, expect, it } from 'vitest';
import { claimPayloads, completeAttempts, type ClaimRequest } from '../../src/delivery/attempt-store.js';
import { DeliveryPump } from '../../src/delivery/pump.js';
import { recoverOrphans } from '../../src/delivery/recover.js';
import { receiverConfig } from '../helpers/config.js';
import { insertPayloads, PAYLOADS_WITH_SLOTS, testDelivery, type TestDelivery } from '../helpers/delivery.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A standby's attempt is started at its claim and counts only once its
// process has said it sent it (asset_webhooks.attempts.sent, recorded by the
// process's next complete_attempts). Crash recovery closes a sent attempt of
// a gone process as interrupted, and gives back an unsent standby with its
// attempt undone. test/e2e/standby-crash.test.ts does the same with a real
// run process killed.

const db = useTestDatabase();
let delivery: TestDelivery;

beforeEach(async () => {
  await resetData(db.pool);
  delivery = await testDelivery(
    db.pool,
    receiverConfig([{ id: 'crm', url: 'http://127.0.0.1:9/hook', concurrency: 2 }], { requestTimeoutSeconds: 2 }),
  );
});
afterEach(() => delivery.close());

function claim(max: number, standby?: ClaimRequest['standby']): ClaimRequest {
  return { now: new Date(), max, share: max, after: null, expireAfterSeconds: 86_400, standby };
}

it('counts a standby reported sent as an attempt of a gone process, and gives back one never sent without counting it', async () => {
  const ids = await insertPayloads(db.pool, 'crm', 4);
  const sent = await claimPayloads(db.pool, claim(4));
  const standbys = await claimPayloads(db.pool, claim(4, { perWebhook: 2, webhooks: ['crm'] }));
  expect(sent.map((payload) => [payload.payloadId, payload.standby])).toEqual([
    [ids[0], false],
    [ids[1], false],
  ]);
  expect(standbys.map((payload) => [payload.payloadId, payload.standby])).toEqual([
    [ids[2], true],
    [ids[3], true],
  ]);
  const flags = async (): Promise<boolean[]> =>
    (
      await db.pool.query<{ sent: boolean }>(
        'select sent from asset_webhooks.in_flight where payload_id = any($1) order by payload_id',
        [ids],
      )
    ).rows.map((row) => row.sent);
  expect(await flags()).toEqual([true, true, false, false]);

  // The process sent the first standby: its next statement (here one that settles nothing) says so.
  await completeAttempts(db.pool, [], [standbys[0]!]);
  expect(await flags()).toEqual([true, true, true, false]);

  // The process is gone (its lease is free) and the attempts are past the grace.
  await db.pool.query(
    "update asset_webhooks.in_flight set process_id = '00000000-0000-4000-8000-00000000dead', started_at = started_at - interval '1 hour'",
  );
  // The grace of a process whose own lease is settled: the request timeout plus 5 s.
  expect(await recoverOrphans(delivery.context, delivery.context.settings().requestTimeoutSeconds + 5)).toBe(4);

  const { rows } = await db.pool.query<{
    payload_id: number;
    attempts: number;
    dispatched: boolean;
    last_attempt_at: Date | null;
    outcomes: Array<string | null>;
  }>(
    `select p.payload_id, p.attempts, f.payload_id is not null as dispatched, p.last_attempt_at,
            array(select coalesce(a.error_class, '') || ' ' || a.outcome from asset_webhooks.attempts a
                  where a.payload_id = p.payload_id order by a.attempt_no) as outcomes
     from ${PAYLOADS_WITH_SLOTS} order by p.payload_id`,
  );
  expect(rows.map(({ last_attempt_at: last, ...row }) => ({ ...row, attempted: last !== null }))).toEqual([
    { payload_id: ids[0], attempts: 1, dispatched: true, outcomes: ['interrupted retry'], attempted: true },
    { payload_id: ids[1], attempts: 1, dispatched: true, outcomes: ['interrupted retry'], attempted: true },
    { payload_id: ids[2], attempts: 1, dispatched: true, outcomes: ['interrupted retry'], attempted: true },
    // Never sent: back in the queue as before its claim.
    { payload_id: ids[3], attempts: 0, dispatched: false, outcomes: [], attempted: false },
  ]);
});

it('records every standby a pump sends as sent, in the statements that write its results', async () => {
  const receiver = await startTestReceiver();
  // Answers at uneven times, so that requests end while standbys wait.
  receiver.respond = (_request, index) =>
    new Promise<number>((resolve) => setTimeout(() => resolve(200), (index * 7) % 13));
  const shop = await testDelivery(
    db.pool,
    receiverConfig([{ id: 'shop', url: receiver.url, concurrency: 4 }], { requestTimeoutSeconds: 2 }),
  );
  const pump = new DeliveryPump(shop.context, { databaseUrl: db.url, goneGraceSeconds: async () => null });
  try {
    await insertPayloads(db.pool, 'shop', 200);
    pump.start();
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ waiting: number }>(
          "select count(*)::int as waiting from asset_webhooks.payloads where webhook_id = 'shop' and status <> 'delivered'",
        );
        return rows[0]!.waiting === 0 ? true : undefined;
      },
      { timeoutMs: 60_000, what: 'every payload delivered' },
    );
    expect(pump.standby.sent).toBeGreaterThan(0);
    const { rows } = await db.pool.query<{ attempts: number; unsent: number }>(
      `select count(*)::int as attempts, count(*) filter (where not a.sent)::int as unsent
       from asset_webhooks.attempts a join asset_webhooks.payloads p using (payload_id) where p.webhook_id = 'shop'`,
    );
    expect(rows[0]).toEqual({ attempts: receiver.requests.length, unsent: 0 });
  } finally {
    await pump.stop();
    await shop.close();
    await receiver.close();
  }
});
