import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { deliverPayload, type DeliveryContext } from '../../src/delivery/deliver.js';
import type { SettleRequest, Settled } from '../../src/delivery/attempt-store.js';
import { ServiceMetrics } from '../../src/service/metrics.js';
import { deliveryContext, ServiceState, syncWebhooks } from '../../src/service/service-state.js';
import { receiverConfig } from '../helpers/config.js';
import { startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData, silentLogger, TEST_PROCESS_ID } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A result the receiver gave while the database was away is written again
// until eight minutes after the attempt started: two minutes short of the
// maintenance task's hand-back (ten minutes), after which the payload would be
// sent again. The database is real; only the settle statement is made to fail
// as an unreachable database does, and performance.now() is moved forward by
// minutes at each failure instead of waiting them out.

const db = useTestDatabase();
let receiver: TestReceiver;
let state: ServiceState;

beforeEach(async () => {
  await resetData(db.pool);
  receiver = await startTestReceiver();
  state = new ServiceState(parseConfigText(receiverConfig([{ id: 'shop', url: receiver.url }], { requestTimeoutSeconds: 2 }), 'test'));
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
  failures: number, minutes: number | ((call: number) => number), stopping?: AbortSignal,
): Promise<{ context: DeliveryContext; payloadId: number; calls: () => number }> {
  const { rows: [row] } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, dispatched)
     values ('shop', 'pending', '{"n":1}', 7, 1, '{}'::uuid[], true) returning payload_id`);
  const real = deliveryContext(db.pool, () => state, silentLogger, new ServiceMetrics(db.pool));
  let calls = 0;
  const settler = {
    settle: async (request: SettleRequest): Promise<Settled> => {
      calls += 1;
      if (calls > failures) return real.settler.settle(request);
      vi.advanceTimersByTime((typeof minutes === 'number' ? minutes : minutes(calls)) * 60_000);
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    },
  };
  return { context: { ...real, settler, stopping }, payloadId: row!.payload_id, calls: () => calls };
}

it('records the result once the database is back within eight minutes of the attempt: one POST, delivered', { timeout: 30_000 }, async () => {
  const { context, payloadId, calls } = await awayFor(3, 2.5);
  const outcome = await deliverPayload({ payloadId, series: 1, attempt: 1 }, context);
  expect(outcome).toMatchObject({ kind: 'attempted', result: { outcome: 'delivered', statusCode: 200 } });
  expect(calls()).toBe(4);
  expect(receiver.requests).toHaveLength(1);
  const { rows } = await db.pool.query('select status, dispatched from asset_webhooks.payloads where payload_id = $1', [payloadId]);
  expect(rows).toEqual([{ status: 'delivered', dispatched: false }]);
});

it('gives up eight minutes after the attempt started, leaving the attempt to maintenance', { timeout: 30_000 }, async () => {
  const { context, payloadId, calls } = await awayFor(10, 3);
  await expect(deliverPayload({ payloadId, series: 1, attempt: 1 }, context)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  // Failed at 3 and 6 minutes (tried again), at 9 minutes past the limit.
  expect(calls()).toBe(3);
  const { rows } = await db.pool.query('select outcome from asset_webhooks.attempts where payload_id = $1', [payloadId]);
  expect(rows).toEqual([{ outcome: null }]);
});

it('once the service is stopping, gives up ten seconds after it first finds so, not at once', { timeout: 30_000 }, async () => {
  const stop = new AbortController();
  // One minute apart until the third failure, which happens while stopping; then four seconds apart.
  const { context, payloadId, calls } = await awayFor(10, (call) => {
    if (call === 3) stop.abort();
    return call <= 3 ? 1 : 4 / 60;
  }, stop.signal);
  await expect(deliverPayload({ payloadId, series: 1, attempt: 1 }, context)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  // Stopping seen at the third failure; tried again at +4 s and +8 s, given up at +12 s.
  expect(calls()).toBe(6);
});
