import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { settleAttempts } from '../../src/delivery/attempt-store.js';
import { deliverPayload, type DeliveryContext } from '../../src/delivery/deliver.js';
import { createLogger } from '../../src/logging/logger.js';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { ServiceMetrics } from '../../src/service/metrics.js';
import { deliveryContext, ServiceState, syncWebhooks } from '../../src/service/service-state.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData, silentLogger, TEST_PROCESS_ID } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Delivery chains: a job that ends its payload for good goes on with the
// webhook's next payload (see asset_webhooks.settle_attempt). These
// tests call one job's work directly, against the real database and a real
// receiver, so what one job did is observable.

const db = useTestDatabase();
let receiver: TestReceiver;
let states: ServiceState[] = [];

beforeEach(async () => {
  await resetData(db.pool);
  receiver = await startTestReceiver();
});
afterEach(async () => {
  await Promise.all(states.map((state) => state.close()));
  states = [];
  await receiver.close();
});

async function setUp(options: { concurrency?: number; deadLetterAfterSeconds?: number; payloads: number }): Promise<{ context: DeliveryContext; ids: number[]; state: ServiceState }> {
  const state = new ServiceState(parseConfigText(receiverConfig(
    [{ id: 'shop', url: receiver.url, concurrency: options.concurrency ?? 1 }],
    { requestTimeoutSeconds: 2, retry: { deadLetterAfterSeconds: options.deadLetterAfterSeconds ?? 86_400 } },
  ), 'test'));
  states.push(state);
  await syncWebhooks(db.pool, state.config, { processId: TEST_PROCESS_ID, logger: silentLogger });
  const { rows } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
     select 'shop', 'pending', '{"n":' || n || '}', 8, 1, '{}'::uuid[] from generate_series(1, $1::int) n
     returning payload_id`, [options.payloads]);
  const ids = rows.map((row) => row.payload_id).sort((a, b) => a - b);
  // What the pump does for the head: one dispatched payload with its job.
  await db.pool.query('update asset_webhooks.payloads set dispatched = true where payload_id = $1', [ids[0]]);
  const context = deliveryContext(db.pool, () => state, silentLogger, new ServiceMetrics(db.pool));
  return { context, ids, state };
}

async function statuses(): Promise<Array<{ payload_id: number; status: string; dispatched: boolean; attempts: number }>> {
  const { rows } = await db.pool.query('select payload_id, status, dispatched, attempts from asset_webhooks.payloads order by payload_id');
  return rows;
}

async function deliverJobs(): Promise<string[]> {
  const { rows } = await db.pool.query<{ key: string }>(
    "select key from graphile_worker.jobs where task_identifier = 'deliver' order by key");
  return rows.map((row) => row.key);
}

describe('delivery chains', () => {
  it('one job delivers a whole backlog in order, one attempt each, and adds no job', async () => {
    const { context, ids } = await setUp({ payloads: 50 });
    const outcome = await deliverPayload({ payloadId: ids[0]!, series: 1, attempt: 1 }, { ...context, chainBudgetMs: 60_000 });
    expect(outcome).toMatchObject({ kind: 'attempted', result: { outcome: 'delivered' } });
    expect(receiver.requests.map((request) => request.body)).toEqual(ids.map((_, i) => `{"n":${i + 1}}`));
    expect((await statuses()).every((row) => row.status === 'delivered' && row.attempts === 1 && !row.dispatched)).toBe(true);
    const { rows } = await db.pool.query('select count(*)::int as n, count(*) filter (where outcome = $1)::int as delivered from asset_webhooks.attempts', ['delivered']);
    expect(rows[0]).toEqual({ n: 50, delivered: 50 });
    expect(await deliverJobs()).toEqual([]);
  });

  it('with concurrency 3, three chains share a backlog and each payload is sent once', async () => {
    const { context, ids } = await setUp({ payloads: 60, concurrency: 3 });
    await db.pool.query('update asset_webhooks.payloads set dispatched = true where payload_id = any($1)', [ids.slice(0, 3)]);
    const chained = { ...context, chainBudgetMs: 60_000 };
    await Promise.all(ids.slice(0, 3).map((payloadId) => deliverPayload({ payloadId, series: 1, attempt: 1 }, chained)));
    const bodies = receiver.requests.map((request) => request.body).sort();
    expect(bodies).toEqual(ids.map((_, i) => `{"n":${i + 1}}`).sort());
    expect((await statuses()).every((row) => row.status === 'delivered' && row.attempts === 1)).toBe(true);
  });

  it('ends the chain when its budget is spent or the service stops: the next payload gets a job', async () => {
    const { context, ids } = await setUp({ payloads: 3 });
    await deliverPayload({ payloadId: ids[0]!, series: 1, attempt: 1 }, { ...context, chainBudgetMs: 0 });
    expect(receiver.requests).toHaveLength(1);
    expect(await deliverJobs()).toEqual([`deliver:${ids[1]}:1:1`]);

    const stopping = new AbortController();
    stopping.abort();
    await deliverPayload({ payloadId: ids[1]!, series: 1, attempt: 1 }, { ...context, chainBudgetMs: 60_000, stopping: stopping.signal });
    expect(receiver.requests).toHaveLength(2);
    expect(await deliverJobs()).toEqual([`deliver:${ids[1]}:1:1`, `deliver:${ids[2]}:1:1`]);
  });

  it('stops at a failing payload: it waits for its retry job and the next one is not sent (concurrency 1)', async () => {
    const { context, ids } = await setUp({ payloads: 4 });
    receiver.respond = (_request, index) => (index === 1 ? 503 : 200);
    await deliverPayload({ payloadId: ids[0]!, series: 1, attempt: 1 }, { ...context, chainBudgetMs: 60_000 });
    expect(receiver.requests).toHaveLength(2);
    expect((await statuses()).map((row) => [row.status, row.dispatched, row.attempts])).toEqual([
      ['delivered', false, 1], ['pending', true, 1], ['pending', false, 0], ['pending', false, 0],
    ]);
    expect(await deliverJobs()).toEqual([`deliver:${ids[1]}:1:2`]);
  });

  it('does not take an expired payload into the chain: it gets a job, which dead-letters it', async () => {
    const { context, ids } = await setUp({ payloads: 2, deadLetterAfterSeconds: 60 });
    await db.pool.query("update asset_webhooks.payloads set series_started_at = now() - interval '2 minutes' where payload_id = $1", [ids[1]]);
    await deliverPayload({ payloadId: ids[0]!, series: 1, attempt: 1 }, { ...context, chainBudgetMs: 60_000 });
    expect(receiver.requests).toHaveLength(1);
    expect(await deliverJobs()).toEqual([`deliver:${ids[1]}:1:1`]);
    expect(await deliverPayload({ payloadId: ids[1]!, series: 1, attempt: 1 }, context)).toEqual({ kind: 'expired' });
    const { rows } = await db.pool.query('select status, dead_letter_reason from asset_webhooks.payloads where payload_id = $1', [ids[1]]);
    expect(rows).toEqual([{ status: 'dead_lettered', dead_letter_reason: 'expired' }]);
  });

  it('puts the next payload back as it was when a reload disabled the webhook meanwhile', async () => {
    const { context, ids } = await setUp({ payloads: 2 });
    // The database still has the webhook enabled; the service's new document does not.
    let calls = 0;
    const reloaded: DeliveryContext = {
      ...context,
      sender: context.sender,
      secrets: context.secrets,
      chainBudgetMs: 60_000,
      webhook: (id) => {
        calls += 1;
        const webhook = context.webhook(id);
        return calls === 1 || !webhook ? webhook : { ...webhook, enabled: false };
      },
    };
    await deliverPayload({ payloadId: ids[0]!, series: 1, attempt: 1 }, reloaded);
    expect(receiver.requests).toHaveLength(1);
    expect((await statuses())[1]).toEqual({ payload_id: ids[1], status: 'pending', dispatched: false, attempts: 0 });
    const { rows } = await db.pool.query('select count(*)::int as n from asset_webhooks.attempts where payload_id = $1', [ids[1]]);
    expect(rows[0]).toEqual({ n: 0 });
  });

  it('maintenance hands back a chained payload whose worker died, closing its attempt as interrupted', async () => {
    const { ids } = await setUp({ payloads: 2 });
    // What a chain leaves when its process is killed mid-POST: the payload
    // dispatched, its attempt started and never settled, and no job for it.
    await db.pool.query(
      `update asset_webhooks.payloads set dispatched = true, attempts = 1, last_attempt_at = now() - interval '11 minutes'
       where payload_id = $1`, [ids[0]]);
    await db.pool.query(
      "insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at) values ($1, 1, 1, now() - interval '11 minutes')", [ids[0]]);
    const result = await runMaintenance({ pool: db.pool, retentionDays: 30, deadLetterAfterSeconds: 86_400, logger: silentLogger });
    expect(result.redispatched).toBe(1);
    const { rows } = await db.pool.query('select outcome, error_class from asset_webhooks.attempts where payload_id = $1', [ids[0]]);
    expect(rows).toEqual([{ outcome: 'retry', error_class: 'interrupted' }]);
    // Handed back and pumped again: its next attempt has a job.
    expect(await deliverJobs()).toEqual([`deliver:${ids[0]}:1:2`]);
  });

  it('logs a result that came after the payload was handed back and taken again as not applied, not as a failure', async () => {
    const { ids, state } = await setUp({ payloads: 1 });
    const sink = new PassThrough();
    const context = deliveryContext(db.pool, () => state, createLogger({ destination: sink }), new ServiceMetrics(db.pool));
    let answer: (status: number) => void = () => {};
    receiver.respond = () => new Promise<number>((resolve) => (answer = resolve));
    const delivering = deliverPayload({ payloadId: ids[0]!, series: 1, attempt: 1 }, context);
    await receiver.waitFor(1);
    // Meanwhile maintenance (in another process) took this process for gone, handed the payload
    // back, and a second attempt started.
    await db.pool.query("update asset_webhooks.attempts set outcome = 'retry', error_class = 'interrupted' where payload_id = $1", [ids[0]]);
    await db.pool.query('update asset_webhooks.payloads set attempts = 2, last_attempt_at = now() where payload_id = $1', [ids[0]]);
    await db.pool.query('insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at) values ($1, 1, 2, now())', [ids[0]]);
    answer(200);
    await delivering;
    const lines = String(sink.read() ?? '').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { msg: string; statusCode?: number });
    expect(lines.map((line) => line.msg)).toEqual([
      'attempt recorded, but the payload had moved on meanwhile (handed back or redelivered): its result does not change the payload',
    ]);
    expect(lines[0]!.statusCode).toBe(200);
    expect(await statuses()).toEqual([{ payload_id: ids[0], status: 'pending', dispatched: true, attempts: 2 }]);
  });

  it('dispatch never starts a payload a settle has just taken into its chain; it takes the next one', async () => {
    const { ids } = await setUp({ concurrency: 2, payloads: 3 });
    await db.pool.query('update asset_webhooks.payloads set attempts = 1, last_attempt_at = now() where payload_id = $1', [ids[0]]);
    await db.pool.query('insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at) values ($1, 1, 1, now())', [ids[0]]);
    const settler = await db.pool.connect();
    try {
      // The first payload's delivery ends and its settle takes the second into its chain, not committed yet.
      await settler.query('begin');
      const [settled] = await settleAttempts(settler, [{
        payload: { payloadId: ids[0]!, series: 1 }, attemptNo: 1, at: new Date(), retryAt: null,
        result: { durationMs: 5, statusCode: 200, errorClass: null, errorMessage: null, responseExcerpt: null, outcome: 'delivered' },
        slot: { chain: true, expireAfterSeconds: 86_400 },
      }]);
      expect(settled!.next?.payloadId).toBe(ids[1]);
      // A pump meanwhile: it sees one free slot and the second payload still waiting.
      let answered = false;
      const dispatching = db.pool.query<{ n: number }>("select asset_webhooks.dispatch('shop') as n").finally(() => (answered = true));
      await eventually(async () => {
        if (answered) return true;
        const { rows } = await db.pool.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'");
        return rows[0]!.n > 0 ? true : undefined;
      }, 10_000, 'the dispatch to answer or to wait for the settle');
      await settler.query('commit');
      expect((await dispatching).rows[0]!.n).toBe(1);
    } finally {
      settler.release();
    }
    // The chain sends the second payload; the pump's job is for the third, never for the second.
    expect(await deliverJobs()).toEqual([`deliver:${ids[2]}:1:1`]);
  });
});
