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

async function attemptCounts(): Promise<{ attempts: number; open: number }> {
  const { rows } = await db.pool.query<{ attempts: number; open: number }>(
    `select count(*)::int as attempts, count(*) filter (where outcome is null)::int as open
     from asset_webhooks.attempts`,
  );
  return rows[0]!;
}

/** Backends of the test's database, other than this query's, matching `where`. */
async function backends(where: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid() and ${where}`,
  );
  return rows[0]!.n;
}

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
    const listener = "application_name = 'asset-webhooks delivery listener'";
    await eventually(async () => ((await backends(listener)) === 1 ? true : undefined), {
      timeoutMs: 10_000,
      what: "the pump's listener",
    });
    // What the receiver and the database hold the moment stop returns.
    const stopped = pump.stop().then(async () => ({
      requests: receiver.requests.length,
      attempts: await attemptCounts(),
    }));
    // Stop has closed the pump's listener, its last step before waiting for
    // the claim: only now does the claim get the lock, so a stop that does
    // not wait for it returns before any attempt.
    await eventually(async () => ((await backends(listener)) === 0 ? true : undefined), {
      timeoutMs: 10_000,
      what: "the pump's listener closed by stop",
    });
    await blocker.query('commit');
    const atStop = await stopped;
    // A claim that stop did not wait for would be running now, or have ended with attempts written.
    await eventually(
      async () => ((await backends("state <> 'idle' and query like '%claim_payloads%'")) === 0 ? true : undefined),
      {
        timeoutMs: 10_000,
        what: 'no claim statement running',
      },
    );
    const later = await attemptCounts();
    expect(atStop.requests).toBe(8);
    expect(atStop.attempts).toEqual({ attempts: 8, open: 0 });
    expect(later).toEqual(atStop.attempts);
    expect(receiver.requests.length).toBe(atStop.requests);
  } finally {
    blocker.release();
    await pump.stop();
    await shop.close();
    await receiver.close();
  }
});
