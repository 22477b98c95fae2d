import { PassThrough } from 'node:stream';
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  abandonAttempt,
  claimPayloads,
  completeAttempts,
  type ClaimedPayload,
} from '../../src/delivery/attempt-store.js';
import { Completer } from '../../src/delivery/completer.js';
import { deliverClaimed, settleAttempt } from '../../src/delivery/deliver.js';
import { DeliveryPump } from '../../src/delivery/pump.js';
import { expiredPayloads } from '../../src/delivery/recovery-reads.js';
import { expireWaiting, recoverOrphans } from '../../src/delivery/recover.js';
import { createLogger } from '../../src/logging/logger.js';
import { receiverConfig, type TestWebhook } from '../helpers/config.js';
import { insertPayloads, PAYLOADS_WITH_SLOTS, testDelivery, type TestDelivery } from '../helpers/delivery.js';
import { ClockPools } from '../helpers/db-clock.js';
import { answerAfter, eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Claiming and settling payloads (asset_webhooks.claim_payloads,
// transition_payloads and complete_attempts, sql/functions/), called
// directly against the real database and a real receiver, and the pump that
// runs them.

const db = useTestDatabase();
let receiver: TestReceiver;
let deliveries: TestDelivery[] = [];
let pumps: DeliveryPump[] = [];
/** The database's clock moved ahead: the one time the delivery rules read. */
let clocks: ClockPools;

beforeEach(async () => {
  await resetData(db.pool);
  receiver = await startTestReceiver();
  clocks = new ClockPools(db.url);
});
afterEach(async () => {
  await Promise.all(pumps.map((pump) => pump.stop()));
  pumps = [];
  await Promise.all(deliveries.map((delivery) => delivery.close()));
  deliveries = [];
  await receiver.close();
  await clocks.close();
});

async function setUp(
  webhooks: ReadonlyArray<Partial<TestWebhook> & { id: string }>,
  options: {
    deadLetterAfterSeconds?: number;
    delaysSeconds?: number[];
    logger?: ReturnType<typeof createLogger>;
    requestTimeoutSeconds?: number;
  } = {},
): Promise<TestDelivery> {
  const yaml = receiverConfig(
    webhooks.map((webhook) => ({ url: receiver.url, ...webhook })),
    {
      requestTimeoutSeconds: options.requestTimeoutSeconds ?? 2,
      retry: {
        deadLetterAfterSeconds: options.deadLetterAfterSeconds ?? 86_400,
        ...(options.delaysSeconds ? { delaysSeconds: options.delaysSeconds } : {}),
      },
    },
  );
  const delivery = await testDelivery(db.pool, yaml, { logger: options.logger });
  deliveries.push(delivery);
  return delivery;
}

/** Claims with the database's clock `aheadMs` ahead. */
function claim(
  aheadMs = 0,
  options: {
    max?: number;
    share?: number;
    after?: string | null;
    expireAfterSeconds?: number;
    standby?: { perWebhook: number; webhooks: string[] };
  } = {},
): Promise<ClaimedPayload[]> {
  return claimPayloads(aheadMs === 0 ? db.pool : clocks.ahead(aheadMs), {
    now: new Date(),
    max: options.max ?? 100,
    share: options.share ?? 100,
    after: options.after ?? null,
    expireAfterSeconds: options.expireAfterSeconds ?? 86_400,
    standby: options.standby,
  });
}

async function states(): Promise<Array<{ payload_id: number; status: string; dispatched: boolean; attempts: number }>> {
  const { rows } = await db.pool.query(
    `select p.payload_id, p.status, f.payload_id is not null as dispatched, p.attempts
     from ${PAYLOADS_WITH_SLOTS} order by p.payload_id`,
  );
  return rows;
}

/** A pump on `context` (its test's: stopped after it), started. */
function startPump(context: TestDelivery['context']): DeliveryPump {
  const pump = new DeliveryPump(context, { databaseUrl: db.url, goneGraceSeconds: async () => null });
  pumps.push(pump);
  pump.start();
  return pump;
}

async function allDelivered(timeoutMs: number): Promise<void> {
  await eventually(async () => ((await states()).every((row) => row.status === 'delivered') ? true : undefined), {
    timeoutMs,
    what: 'every payload delivered',
  });
}

const ok = { durationMs: 5, statusCode: 200, errorClass: null, errorMessage: null, responseExcerpt: null } as const;
const unavailable = { ...ok, statusCode: 503 } as const;

describe('claiming payloads', () => {
  it('with concurrency 1 claims only the head, and the next one once the head is delivered', async () => {
    const { context } = await setUp([{ id: 'shop' }]);
    const ids = await insertPayloads(db.pool, 'shop', 3);
    const first = await claim();
    expect(first.map((payload) => [payload.payloadId, payload.attemptNo, payload.body])).toEqual([
      [ids[0], 1, '{"n":1}'],
    ]);
    expect(await claim()).toEqual([]);
    await settleAttempt(context, first[0]!, ok, 'delivered');
    expect((await claim()).map((payload) => payload.payloadId)).toEqual([ids[1]]);
  });

  it('a failed head keeps its slot until its retry time (concurrency 1), then is claimed again as attempt 2', async () => {
    const { context } = await setUp([{ id: 'shop' }], { delaysSeconds: [30] });
    const ids = await insertPayloads(db.pool, 'shop', 2);
    const [head] = await claim();
    await settleAttempt(context, head!, unavailable, 'retryable');
    expect((await states()).map((row) => [row.status, row.dispatched, row.attempts])).toEqual([
      ['pending', true, 1],
      ['pending', false, 0],
    ]);
    expect(await claim(29_000)).toEqual([]);
    const again = await claim(31_000);
    expect(again.map((payload) => [payload.payloadId, payload.attemptNo])).toEqual([[ids[0], 2]]);
  });

  it('never dead-letters a payload as expired before its window has passed, when the series started between two milliseconds', async () => {
    const { context } = await setUp([{ id: 'shop' }], { delaysSeconds: [1, 1, 1, 1], deadLetterAfterSeconds: 3 });
    const [id] = await insertPayloads(db.pool, 'shop', 1);
    // The start keeps microseconds in the database: 0.8 ms past a millisecond.
    await db.pool.query(
      "update asset_webhooks.payloads set series_started_at = date_trunc('milliseconds', clock_timestamp()) + interval '800 microseconds' where payload_id = $1",
      [id],
    );
    /**
     * Runs `probe` on a session whose database clock is set to the series'
     * start + ms (it runs on from there): its result, and the clock's reading
     * (ms after the start) once it is done.
     */
    async function at<T>(
      ms: number,
      probe: (client: pg.PoolClient) => Promise<T>,
    ): Promise<{ value: T; doneAt: number }> {
      const client = await db.pool.connect();
      try {
        await client.query(
          `select set_config('asset_webhooks.clock',
                    (p.series_started_at + $2 * interval '1 millisecond' - clock_timestamp())::text, false)
           from asset_webhooks.payloads p where p.payload_id = $1`,
          [id, ms],
        );
        const value = await probe(client);
        const { rows } = await client.query<{ done_at: string }>(
          'select extract(epoch from asset_webhooks.now() - series_started_at) * 1000 as done_at from asset_webhooks.payloads where payload_id = $1',
          [id],
        );
        return { value, doneAt: Number(rows[0]!.done_at) };
      } finally {
        await client.query("select set_config('asset_webhooks.clock', '', false)");
        client.release();
      }
    }
    /**
     * Runs `probe` on a session whose database clock is stopped at the series'
     * start + ms: the decision is taken at that exact instant, however slow
     * the machine is.
     */
    async function stoppedAt<T>(ms: number, probe: (client: pg.PoolClient) => Promise<T>): Promise<T> {
      const client = await db.pool.connect();
      try {
        await client.query(
          `select set_config('asset_webhooks.clock', (p.series_started_at + $2 * interval '1 millisecond')::text, false)
           from asset_webhooks.payloads p where p.payload_id = $1`,
          [id, ms],
        );
        return await probe(client);
      } finally {
        await client.query("select set_config('asset_webhooks.clock', '', false)");
        client.release();
      }
    }
    const claimAt = (client: pg.PoolClient): Promise<ClaimedPayload[]> =>
      claimPayloads(client, { now: new Date(), max: 100, share: 100, after: null, expireAfterSeconds: 3 });
    const { value: claimed } = await at(0, claimAt);
    const [first] = claimed;
    expect(first).toBeDefined();
    // A failure 2.5 s in is retried at the window's end: the database's, to the microsecond.
    await at(2500, (client) =>
      settleAttempt({ ...context, completer: new Completer(client) }, first!, unavailable, 'retryable'),
    );
    const {
      rows: [retry],
    } = await db.pool.query<{ due: boolean }>(
      `select f.next_attempt_at >= p.series_started_at + interval '3 seconds' as due from ${PAYLOADS_WITH_SLOTS}
       where p.payload_id = $1`,
      [id],
    );
    expect(retry!.due).toBe(true);
    // So no claim between the two ends takes it: the expiry sweep ends it at the database's end.
    // The window ends 3,000 ms after the start, which lies 0.8 ms past a
    // millisecond. Decided 0.1 ms past where it would end were the start cut to
    // milliseconds, and a hundredth of a millisecond before its true end:
    for (const ms of [2999.3, 2999.99]) {
      expect(await stoppedAt(ms, claimAt)).toEqual([]);
      expect(await stoppedAt(ms, (client) => expiredPayloads(client, 3, 10))).toEqual([]);
    }
    // At the end exactly, the sweep ends it and no claim takes it.
    expect(await stoppedAt(3000, claimAt)).toEqual([]);
    expect(await stoppedAt(3000, (client) => expiredPayloads(client, 3, 10))).toEqual([{ payloadId: id, series: 1 }]);
    expect((await at(3001, claimAt)).value).toEqual([]);
    expect((await at(3001, (client) => expiredPayloads(client, 3, 10))).value).toEqual([{ payloadId: id, series: 1 }]);
  });

  it('two processes claiming at once never exceed the concurrency and never take a payload twice', async () => {
    await setUp([{ id: 'shop', concurrency: 5 }]);
    await insertPayloads(db.pool, 'shop', 20);
    const rounds = await Promise.all(Array.from({ length: 4 }, () => claim()));
    const claimed = rounds.flat().map((payload) => payload.payloadId);
    expect(claimed.length).toBeLessThanOrEqual(5);
    expect(new Set(claimed).size).toBe(claimed.length);
    // Whichever call got them, the five slots are used.
    const again = await claim();
    expect(claimed.length + again.length).toBe(5);
  });

  it('webhooks take turns: a long backlog gives way after its share to a webhook with one payload', async () => {
    await setUp([{ id: 'big', concurrency: 64 }, { id: 'small' }]);
    await insertPayloads(db.pool, 'big', 1000);
    const [single] = await insertPayloads(db.pool, 'small', 1);
    const first = await claim(0, { max: 8, share: 8 });
    expect(new Set(first.map((payload) => payload.webhookId))).toEqual(new Set(['big']));
    const second = await claim(0, { max: 8, share: 8, after: first.at(-1)!.webhookId });
    expect(second[0]).toMatchObject({ webhookId: 'small', payloadId: single });
  });

  it('claims standbys beyond the concurrency only for the webhooks named, never with concurrency 1 or while failing', async () => {
    const { context } = await setUp(
      [
        { id: 'shop', concurrency: 4 },
        { id: 'crm', concurrency: 4 },
        { id: 'erp', concurrency: 1 },
      ],
      { delaysSeconds: [600] },
    );
    for (const webhook of ['shop', 'crm', 'erp']) await insertPayloads(db.pool, webhook, 10);
    const standby = { perWebhook: 2, webhooks: ['shop', 'erp'] };
    const first = await claim(0, { standby });
    const of = (webhookId: string, claimed: ClaimedPayload[]) =>
      claimed.filter((payload) => payload.webhookId === webhookId).map((payload) => payload.standby);
    // In payload order: the concurrency is sent, the rest waits as standby.
    expect(of('shop', first)).toEqual([false, false, false, false, true, true]);
    expect(of('crm', first)).toEqual([false, false, false, false]);
    expect(of('erp', first)).toEqual([false]);
    expect(await claim(0, { standby })).toEqual([]);
    // A request written while the standbys are held: the next claim sends one in its place (a standby
    // held is at no receiver), and the one after finds 4 sent and 2 standbys, and takes nothing.
    const shop = first.filter((payload) => payload.webhookId === 'shop');
    await settleAttempt(context, shop[0]!, ok, 'delivered');
    const refill = await claim(0, { standby });
    expect(refill.map((payload) => [payload.webhookId, payload.standby])).toEqual([['shop', false]]);
    expect(await claim(0, { standby })).toEqual([]);
    // Failing: one attempt in flight, and no standby.
    for (const payload of [...shop.slice(2), ...refill, ...first.filter((p) => p.webhookId !== 'shop')])
      await settleAttempt(context, payload, ok, 'delivered');
    await settleAttempt(context, shop[1]!, unavailable, 'retryable');
    const { rows } = await db.pool.query<{ payload_id: number; series: number; attempts: number }>(
      `select payload_id, series, attempt_no as attempts from asset_webhooks.in_flight
       where webhook_id = 'shop' and next_attempt_at is null`,
    );
    for (const row of rows)
      await abandonAttempt(db.pool, { payloadId: row.payload_id, series: row.series, attemptNo: row.attempts });
    const failing = await claim(0, { standby });
    expect(of('shop', failing)).toEqual([false]);
    expect(of('erp', failing)).toEqual([false]);
  });

  it('a failing webhook has at most one attempt in flight until one succeeds', async () => {
    const { context } = await setUp([{ id: 'shop', concurrency: 8 }], { delaysSeconds: [600] });
    await insertPayloads(db.pool, 'shop', 20);
    const first = await claim();
    expect(first).toHaveLength(8);
    await settleAttempt(context, first[0]!, unavailable, 'retryable');
    const {
      rows: [webhook],
    } = await db.pool.query(
      "select failing_since is not null as failing from asset_webhooks.webhooks where webhook_id = 'shop'",
    );
    expect(webhook).toEqual({ failing: true });
    // Seven still in flight: nothing more while failing.
    expect(await claim()).toEqual([]);
    for (const payload of first.slice(1))
      await settleAttempt(context, payload, { ...ok, statusCode: null, errorClass: 'timeout' }, 'retryable');
    // Their retries come due together: one at a time.
    const later = 601_000;
    const single = await claim(later);
    expect(single).toHaveLength(1);
    expect(await claim(later)).toEqual([]);
    await settleAttempt(clocks.context(context, later), single[0]!, ok, 'delivered');
    // Healthy again: the other seven retries and the freed slot are used at once.
    expect(await claim(later)).toHaveLength(8);
    const {
      rows: [healthy],
    } = await db.pool.query("select failing_since from asset_webhooks.webhooks where webhook_id = 'shop'");
    expect(healthy).toEqual({ failing_since: null });
  });

  it('a throttled webhook is not claimed until its Retry-After passes; another webhook is', async () => {
    const { context } = await setUp([{ id: 'shop', concurrency: 4 }, { id: 'crm' }], { delaysSeconds: [1] });
    const shop = await insertPayloads(db.pool, 'shop', 3);
    const first = await claim();
    const shopClaimed = first.filter((payload) => payload.webhookId === 'shop');
    expect(shopClaimed).toHaveLength(3);
    await settleAttempt(context, shopClaimed[0]!, { ...ok, statusCode: 429 }, 'retryable', 120_000);
    const [crm] = await insertPayloads(db.pool, 'crm', 1);
    const {
      rows: [payload],
    } = await db.pool.query<{ in_s: number }>(
      'select round(extract(epoch from next_attempt_at - asset_webhooks.now()))::int as in_s from asset_webhooks.in_flight where payload_id = $1',
      [shop[0]],
    );
    // Its Retry-After, from the database's clock as the result was written.
    expect(payload!.in_s).toBe(120);
    // The other two of shop are settled meanwhile; its queue stays held, crm goes on.
    for (const other of shopClaimed.slice(1)) await settleAttempt(context, other, ok, 'delivered');
    await insertPayloads(db.pool, 'shop', 1);
    expect((await claim(60_000)).map((claimed) => claimed.payloadId)).toEqual([crm]);
    const after = await claim(121_000);
    expect(after.map((claimed) => claimed.webhookId)).toEqual(['shop', 'shop']);
  });

  it('does not claim an expired payload; the expiry sweep dead-letters it, and the next one is claimed', async () => {
    const { context } = await setUp([{ id: 'shop' }], { deadLetterAfterSeconds: 60 });
    const ids = await insertPayloads(db.pool, 'shop', 2);
    await db.pool.query(
      "update asset_webhooks.payloads set series_started_at = now() - interval '2 minutes' where payload_id = $1",
      [ids[0]],
    );
    expect(await claim(0, { expireAfterSeconds: 60 })).toEqual([]);
    expect(await expireWaiting(context)).toBe(1);
    const { rows } = await db.pool.query(
      'select status, dead_letter_reason from asset_webhooks.payloads where payload_id = $1',
      [ids[0]],
    );
    expect(rows).toEqual([{ status: 'dead_lettered', dead_letter_reason: 'expired' }]);
    expect((await claim(0, { expireAfterSeconds: 60 })).map((payload) => payload.payloadId)).toEqual([ids[1]]);
  });
});

describe('attempts of claimed payloads', () => {
  it('puts a claimed payload back as it was when a reload disabled the webhook meanwhile', async () => {
    const { context } = await setUp([{ id: 'shop' }]);
    const ids = await insertPayloads(db.pool, 'shop', 1);
    const [claimed] = await claim();
    const reloaded = { ...context, webhook: (id: string) => ({ ...context.webhook(id)!, enabled: false }) };
    expect(await deliverClaimed(claimed!, reloaded)).toBeNull();
    expect(receiver.requests).toHaveLength(0);
    expect(await states()).toEqual([{ payload_id: ids[0], status: 'pending', dispatched: false, attempts: 0 }]);
    const { rows } = await db.pool.query('select count(*)::int as n from asset_webhooks.attempts');
    expect(rows[0]).toEqual({ n: 0 });
  });

  it('crash recovery closes an attempt that names no process as interrupted, and it is claimed again at once', async () => {
    const { context } = await setUp([{ id: 'shop' }]);
    const ids = await insertPayloads(db.pool, 'shop', 2);
    await claim();
    await db.pool.query("update asset_webhooks.in_flight set started_at = now() - interval '11 minutes'");
    expect(await recoverOrphans(context, null)).toBe(1);
    const { rows } = await db.pool.query(
      'select outcome, error_class from asset_webhooks.attempts where payload_id = $1',
      [ids[0]],
    );
    expect(rows).toEqual([{ outcome: 'retry', error_class: 'interrupted' }]);
    // Interrupted, not failed: the receiver is not taken for failing, and the payload is due now.
    const {
      rows: [webhook],
    } = await db.pool.query("select failing_since from asset_webhooks.webhooks where webhook_id = 'shop'");
    expect(webhook).toEqual({ failing_since: null });
    expect((await claim()).map((payload) => [payload.payloadId, payload.attemptNo])).toEqual([[ids[0], 2]]);
  });

  it('logs a result that came after the attempt was recovered and taken again as not applied, not as a failure', async () => {
    const sink = new PassThrough();
    const { context } = await setUp([{ id: 'shop' }], { logger: createLogger({ destination: sink }) });
    const ids = await insertPayloads(db.pool, 'shop', 1);
    let answer: (status: number) => void = () => {};
    receiver.respond = () => new Promise<number>((resolve) => (answer = resolve));
    const [claimed] = await claim();
    const delivering = deliverClaimed(claimed!, context);
    await receiver.waitFor(1);
    // Meanwhile another process took this one for gone, closed the attempt and claimed the payload again.
    await completeAttempts(db.pool, [
      {
        payload: { payloadId: ids[0]!, series: 1 },
        attemptNo: 1,
        retryInMs: 0,
        windowSeconds: null,
        receiverFailed: null,
        holdWebhookForMs: null,
        result: {
          durationMs: null,
          statusCode: null,
          errorClass: 'interrupted',
          errorMessage: null,
          responseExcerpt: null,
          outcome: 'retry',
        },
      },
    ]);
    expect(await claim()).toHaveLength(1);
    answer(200);
    await delivering;
    const lines = String(sink.read() ?? '')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { msg: string; statusCode?: number });
    expect(lines.map((line) => line.msg)).toEqual([
      'attempt recorded, but the payload had moved on meanwhile (handed back or redelivered): its result does not change the payload',
    ]);
    expect(lines[0]!.statusCode).toBe(200);
    // Attempt 2 in flight, after the one interrupted: one finished.
    expect(await states()).toEqual([{ payload_id: ids[0], status: 'pending', dispatched: true, attempts: 1 }]);
  });
});

describe('the delivery pump', () => {
  it('delivers a backlog in order with concurrency 1, one attempt each', async () => {
    const { context } = await setUp([{ id: 'shop' }]);
    const ids = await insertPayloads(db.pool, 'shop', 50);
    const pump = startPump(context);
    await receiver.waitFor(50, 30_000);
    expect(receiver.requests.map((request) => request.body)).toEqual(ids.map((_, i) => `{"n":${i + 1}}`));
    await eventually(
      async () =>
        (await states()).every((row) => row.status === 'delivered' && row.attempts === 1 && !row.dispatched)
          ? true
          : undefined,
      { timeoutMs: 10_000, what: 'every payload delivered' },
    );
  });

  it('claims again as soon as attempts end, not at the next poll: the statements that write results claim nothing', async () => {
    const { context } = await setUp([{ id: 'shop', concurrency: 2 }]);
    await insertPayloads(db.pool, 'shop', 40);
    const statements: string[] = [];
    const pool = new Proxy(db.pool, {
      get(target, property, receiverOfGet) {
        if (property !== 'query') return Reflect.get(target, property, receiverOfGet) as unknown;
        return (query: unknown, ...rest: unknown[]) => {
          const text = typeof query === 'string' ? query : (query as { text: string }).text;
          if (text.includes('asset_webhooks.complete_attempts(')) statements.push(text);
          return (target.query as (...args: unknown[]) => unknown)(query, ...rest);
        };
      },
    });
    const pump = startPump({ ...context, pool, completer: new Completer(pool) });
    const started = performance.now();
    await receiver.waitFor(40, 30_000);
    // A claim at each poll (every second) would take twenty seconds for forty payloads two at a time.
    expect(performance.now() - started).toBeLessThan(10_000);
    await allDelivered(10_000);
    expect(pump.standby.sent).toBeGreaterThan(0);
    expect(statements.length).toBeGreaterThan(0);
    expect(statements.filter((text) => text.includes('claim_payloads'))).toEqual([]);
  });

  it('sends standbys in place of ended requests, never more than the concurrency at once, with two pumps and failures', async () => {
    // A delivery context each, as two processes have.
    const contexts = [];
    for (let i = 0; i < 2; i += 1)
      contexts.push((await setUp([{ id: 'shop', concurrency: 4 }], { delaysSeconds: [1] })).context);
    const ids = await insertPayloads(db.pool, 'shop', 300);
    let open = 0;
    let most = 0;
    // The first request of every 23rd payload fails (its retry, the only one configured, succeeds).
    const failed = new Set<string>();
    const fails = (body: string): boolean =>
      Number(/\d+/.exec(body)![0]) % 23 === 7 && !failed.has(body) && failed.add(body).size > 0;
    receiver.respond = (request, index) => {
      open += 1;
      most = Math.max(most, open);
      const status = fails(request.body) ? 503 : 200;
      // Answers at uneven times, so that requests end while standbys are being claimed.
      return new Promise<number>((resolve) =>
        setTimeout(
          () => {
            open -= 1;
            resolve(status);
          },
          (index * 7) % 13,
        ),
      );
    };
    const started = contexts.map((context) => startPump(context));
    await allDelivered(60_000);
    expect(most).toBeLessThanOrEqual(4);
    expect(started.reduce((sum, pump) => sum + pump.standby.sent, 0)).toBeGreaterThan(0);
    // Every attempt recorded was a request the receiver got: standbys given back left no attempt behind.
    const { rows } = await db.pool.query<{ attempts: number; open: number }>(
      'select count(*)::int as attempts, count(*) filter (where outcome is null)::int as open from asset_webhooks.attempts',
    );
    expect(rows[0]).toEqual({ attempts: receiver.requests.length, open: 0 });
    expect(failed.size).toBe(13);
    // Every payload once, and the failed ones twice.
    const bodies = ids.map((_, i) => `{"n":${i + 1}}`);
    expect(receiver.requests.map((request) => request.body).sort()).toEqual([...bodies, ...failed].sort());
  });

  it("records a standby's attempt as starting when its request was sent, not when it was claimed", async () => {
    const { context } = await setUp([{ id: 'shop', concurrency: 2 }]);
    const ids = await insertPayloads(db.pool, 'shop', 4);
    answerAfter(receiver, 200);
    const pump = startPump(context);
    await allDelivered(10_000);
    expect(pump.standby.sent).toBe(2);
    // The last two were claimed with the first two, and sent once those were answered, 200 ms or more later.
    const { rows } = await db.pool.query<{ payload_id: number; started_at: Date }>(
      'select payload_id, started_at from asset_webhooks.attempts order by payload_id',
    );
    expect(rows.map((row) => row.payload_id)).toEqual(ids);
    const firstArrival = receiver.requests[0]!.at;
    for (const row of rows.slice(2)) expect(row.started_at.getTime()).toBeGreaterThanOrEqual(firstArrival + 150);
  });

  it('gives back a standby not sent within two seconds of its claim, and claims none for a receiver that slow', async () => {
    const { context } = await setUp([{ id: 'shop', concurrency: 2 }], { requestTimeoutSeconds: 10 });
    await insertPayloads(db.pool, 'shop', 6);
    answerAfter(receiver, 2500);
    const pump = startPump(context);
    // Nothing is known of the receiver yet: the first claim takes two standbys.
    await eventually(async () => (pump.standby.held === 2 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'two standbys held',
    });
    await allDelivered(20_000);
    // The first two, and no more once the receiver's first answers took 2.5 s.
    expect(pump.standby).toEqual({ held: 0, sent: 0, givenBack: 2 });
    // Each payload was sent once, in one attempt: the standbys' claims were given back, not recorded.
    expect(receiver.requests).toHaveLength(6);
    const { rows } = await db.pool.query<{ attempts: number; n: number }>(
      'select attempt_no as attempts, count(*)::int as n from asset_webhooks.attempts group by 1',
    );
    expect(rows).toEqual([{ attempts: 1, n: 6 }]);
  });

  it('gives back its standbys when it stops: their payloads wait in the queue, with no attempt recorded', async () => {
    const { context } = await setUp([{ id: 'shop', concurrency: 4 }]);
    await insertPayloads(db.pool, 'shop', 20);
    answerAfter(receiver, 300);
    const pump = new DeliveryPump(context, { databaseUrl: db.url, goneGraceSeconds: async () => null });
    pump.start();
    await eventually(async () => (pump.standby.held === 2 && receiver.requests.length === 4 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'four requests open and two standbys held',
    });
    await pump.stop();
    // The requests open finished; nothing more was sent.
    expect(receiver.requests).toHaveLength(4);
    const { rows } = await db.pool.query<{ status: string; dispatched: boolean; n: number }>(
      `select p.status, f.payload_id is not null as dispatched, count(*)::int as n from ${PAYLOADS_WITH_SLOTS}
       group by 1, 2 order by 1, 2`,
    );
    const sent = receiver.requests.length;
    expect(rows).toEqual([
      { status: 'delivered', dispatched: false, n: sent },
      { status: 'pending', dispatched: false, n: 20 - sent },
    ]);
    const { rows: attempts } = await db.pool.query<{ n: number }>(
      'select count(*)::int as n from asset_webhooks.attempts',
    );
    expect(attempts[0]!.n).toBe(sent);
    const { rows: given } = await db.pool.query<{ attempts: number; last_attempt_at: Date | null }>(
      "select attempts, last_attempt_at from asset_webhooks.payloads where status = 'pending'",
    );
    expect(new Set(given.map((row) => `${row.attempts} ${String(row.last_attempt_at)}`))).toEqual(new Set(['0 null']));
  });

  it('with concurrency 3 and two pumps on one database, sends each payload once and at most 3 at a time', async () => {
    const contexts = [];
    for (let i = 0; i < 2; i += 1) contexts.push((await setUp([{ id: 'shop', concurrency: 3 }])).context);
    const ids = await insertPayloads(db.pool, 'shop', 60);
    const concurrent = answerAfter(receiver, 20);
    for (const context of contexts) startPump(context);
    await receiver.waitFor(60, 30_000);
    await allDelivered(10_000);
    expect(receiver.requests.map((request) => request.body).sort()).toEqual(ids.map((_, i) => `{"n":${i + 1}}`).sort());
    expect(concurrent.most()).toBeLessThanOrEqual(3);
    expect(concurrent.most()).toBeGreaterThan(1);
  });
});
