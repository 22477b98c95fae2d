import { beforeEach, expect, it } from 'vitest';
import { DeliveryPump } from '../../src/delivery/pump.js';
import { receiverConfig } from '../helpers/config.js';
import { insertPayloads, testDelivery } from '../helpers/delivery.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A `run` process stopped by SIGTERM stops its pump: nothing it started may
// be left for crash recovery. A claim already in the database when stop
// begins starts attempts too; stop waits for it, and for what it brings.

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
});

it('stop waits for a claim under way: the attempts it starts are made and written before stop returns', async () => {
  const receiver = await startTestReceiver();
  const shop = await testDelivery(db.pool, receiverConfig([{ id: 'shop', url: receiver.url, concurrency: 8 }]));
  const pump = new DeliveryPump(shop.context, { databaseUrl: db.url, goneGraceSeconds: async () => null });
  // Holds the pump's first claim in the database until after stop has begun:
  // the claim reads webhooks, which this transaction locks.
  const blocker = await db.pool.connect();
  try {
    await insertPayloads(db.pool, 'shop', 8);
    await blocker.query('begin');
    await blocker.query('lock table asset_webhooks.webhooks in access exclusive mode');
    pump.start();
    // The claim has reached the database and waits there on the lock.
    await eventually(
      async () => {
        const { rows } = await db.pool.query(
          `select 1 from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock' and query like '%claim_payloads%'`,
        );
        return rows.length > 0 ? true : undefined;
      },
      { timeoutMs: 10_000, what: 'the claim waiting on the lock' },
    );
    const released = new Promise<void>((resolve) =>
      setTimeout(() => void blocker.query('commit').then(() => resolve()), 500),
    );
    await pump.stop();
    const requestsAtStop = receiver.requests.length;
    const { rows: atStop } = await db.pool.query<{ attempts: number; open: number }>(
      `select count(*)::int as attempts, count(*) filter (where outcome is null)::int as open
       from asset_webhooks.attempts`,
    );
    await released;
    // Time for a claim that stop did not wait for to end, and for what it would send.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const { rows: later } = await db.pool.query<{ attempts: number; open: number }>(
      `select count(*)::int as attempts, count(*) filter (where outcome is null)::int as open
       from asset_webhooks.attempts`,
    );
    expect(requestsAtStop).toBe(8);
    expect(atStop[0]).toEqual({ attempts: 8, open: 0 });
    expect(later[0]).toEqual(atStop[0]);
    expect(receiver.requests.length).toBe(requestsAtStop);
  } finally {
    blocker.release();
    await pump.stop();
    await shop.close();
    await receiver.close();
  }
});
