import { readInstallationId } from '../../src/db/installation.js';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import type { DeliveryContext } from '../../src/delivery/context.js';
import { deliverClaimed } from '../../src/delivery/deliver.js';
import {
  claimPayloads,
  type AttemptOf,
  type ClaimedPayload,
  type SettleRequest,
  type Settled,
} from '../../src/delivery/attempt-store.js';
import { ServiceMetrics } from '../../src/service/metrics.js';
import { deliveryContext, ServiceState, syncWebhooks } from '../../src/service/service-state.js';
import { receiverConfig } from '../helpers/config.js';
import { startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData, silentLogger, TEST_PROCESS_ID } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A result the receiver gave while the database was away stays in memory and
// is written once the database answers again, however long that takes: crash
// recovery leaves the attempt alone while its process lives, so the payload
// is never sent twice. The database is real; only the settle statement is
// made to fail as an unreachable database does (each way a connection
// fails), and performance.now() is moved forward at each failure instead of
// waiting it out.

const db = useTestDatabase();
let receiver: TestReceiver;
let state: ServiceState;

beforeEach(async () => {
  await resetData(db.pool);
  receiver = await startTestReceiver();
  state = new ServiceState(
    parseConfigText(receiverConfig([{ id: 'shop', url: receiver.url }], { requestTimeoutSeconds: 2 }), 'test'),
  );
  await syncWebhooks(db.pool, state.config, { processId: TEST_PROCESS_ID, logger: silentLogger });
  vi.useFakeTimers({ toFake: ['performance'] });
});
afterEach(async () => {
  vi.useRealTimers();
  await state.close();
  await receiver.close();
});

/**
 * A context whose settle statement fails `failures` times as an unreachable
 * database does, `minutes` apart (or as `minutes(call)` says, from 1).
 */
async function awayFor(
  failures: number,
  minutes: number | ((call: number) => number),
  stopping?: AbortSignal,
): Promise<{ context: DeliveryContext; payloadId: number; claimed: ClaimedPayload; calls: () => number }> {
  const {
    rows: [row],
  } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
     values ('shop', 'pending', '{"n":1}', 7, 1, '{}'::uuid[]) returning payload_id`,
  );
  const [claimed] = await claimPayloads(db.pool, {
    now: new Date(),
    max: 1,
    share: 1,
    after: null,
    expireAfterSeconds: 86_400,
  });
  const real = deliveryContext(
    db.pool,
    await readInstallationId(db.pool),
    () => state,
    silentLogger,
    new ServiceMetrics(db.pool),
  );
  let calls = 0;
  const completer = {
    settle: async (request: SettleRequest): Promise<Settled> => {
      calls += 1;
      if (calls > failures) return real.completer.settle(request);
      vi.advanceTimersByTime((typeof minutes === 'number' ? minutes : minutes(calls)) * 60_000);
      throw LOST_CONNECTIONS[(calls - 1) % LOST_CONNECTIONS.length]!();
    },
    markSent: (attempt: AttemptOf) => real.completer.markSent(attempt),
  };
  return {
    context: { ...real, completer, stopping },
    payloadId: row!.payload_id,
    claimed: claimed!,
    calls: () => calls,
  };
}

/** How a lost database shows, one after another: every one of them keeps the result for later. */
const LOST_CONNECTIONS: Array<() => Error> = [
  () => Object.assign(new Error('connect ENOENT /var/run/postgresql/.s.PGSQL.5432'), { code: 'ENOENT' }),
  () => Object.assign(new Error('getaddrinfo ENOTFOUND db.internal'), { code: 'ENOTFOUND' }),
  () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
  () => Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
  () => new Error('Connection terminated unexpectedly'),
  () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
];

it(
  'keeps the result while the database is away, for hours, and records it once it answers: one POST, delivered',
  { timeout: 30_000 },
  async () => {
    const { context, payloadId, claimed, calls } = await awayFor(5, 120);
    const result = await deliverClaimed(claimed, context);
    expect(result).toMatchObject({ outcome: 'delivered', statusCode: 200 });
    expect(calls()).toBe(6);
    expect(receiver.requests).toHaveLength(1);
    const { rows } = await db.pool.query(
      `select p.status, f.payload_id is not null as dispatched
       from asset_webhooks.payloads p left join asset_webhooks.in_flight f using (payload_id) where p.payload_id = $1`,
      [payloadId],
    );
    expect(rows).toEqual([{ status: 'delivered', dispatched: false }]);
  },
);

it(
  'once the service is stopping, gives up ten seconds after it first finds so, not at once, leaving the attempt to crash recovery',
  { timeout: 30_000 },
  async () => {
    const stop = new AbortController();
    // One minute apart until the third failure, which happens while stopping; then four seconds apart.
    const { context, payloadId, claimed, calls } = await awayFor(
      10,
      (call) => {
        if (call === 3) stop.abort();
        return call <= 3 ? 1 : 4 / 60;
      },
      stop.signal,
    );
    await expect(deliverClaimed(claimed, context)).rejects.toMatchObject({ code: expect.any(String) });
    // Stopping seen at the third failure; tried again at +4 s and +8 s, given up at +12 s.
    expect(calls()).toBe(6);
    const { rows } = await db.pool.query('select outcome from asset_webhooks.attempts where payload_id = $1', [
      payloadId,
    ]);
    expect(rows).toEqual([{ outcome: null }]);
  },
);
