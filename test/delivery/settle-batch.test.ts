import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { settleAttempts, type AttemptResult, type SettleRequest } from '../../src/delivery/attempt-store.js';
import { SettleBatcher } from '../../src/delivery/settle-batcher.js';
import { syncWebhooks } from '../../src/service/service-state.js';
import { receiverConfig } from '../helpers/config.js';
import { resetData, silentLogger, TEST_PROCESS_ID } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Attempt results written several per statement (asset_webhooks.settle_attempts
// in sql/migrations/0001_baseline.sql): each result must be settled exactly
// as it would have been alone, and a failing batch must change nothing.

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
});

/** `count` pending payloads of the webhook, the first `started` of them dispatched with attempt 1 started. */
async function payloads(webhookId: string, count: number, started: number): Promise<number[]> {
  const { rows } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
     select $1, 'pending', '{"n":' || n || '}', 8, 1, '{}'::uuid[] from generate_series(1, $2::int) n
     returning payload_id`, [webhookId, count]);
  const ids = rows.map((row) => row.payload_id).sort((a, b) => a - b);
  const head = ids.slice(0, started);
  await db.pool.query(
    "update asset_webhooks.payloads set dispatched = true, attempts = 1, last_attempt_at = now() where payload_id = any($1)", [head]);
  await db.pool.query(
    'insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at) select id, 1, 1, now() from unnest($1::bigint[]) id', [head]);
  return ids;
}

async function webhooks(list: ReadonlyArray<{ id: string; concurrency: number; enabled?: boolean }>): Promise<void> {
  await syncWebhooks(db.pool, parseConfigText(receiverConfig(list.map((w) => ({ ...w, url: 'http://127.0.0.1:9/' }))), 'test'), { processId: TEST_PROCESS_ID, logger: silentLogger });
}

const ok: AttemptResult = { durationMs: 3, statusCode: 200, errorClass: null, errorMessage: null, responseExcerpt: 'ok', outcome: 'delivered' };

function request(payloadId: number, result: Partial<AttemptResult> = {}, options: { chain?: boolean; series?: number; retryAt?: Date } = {}): SettleRequest {
  return {
    payload: { payloadId, series: options.series ?? 1 }, attemptNo: 1, result: { ...ok, ...result }, at: new Date(),
    retryAt: options.retryAt ?? null, slot: { chain: options.chain ?? false, expireAfterSeconds: 86_400 },
  };
}

/** The pool as settle_attempts sees it, noting the size of every batch written. */
function counting(pool: pg.Pool): { pool: pg.Pool; batches: number[] } {
  const batches: number[] = [];
  const query = (text: string, values: unknown[][]): Promise<pg.QueryResult> => {
    if (text.includes('settle_attempts')) batches.push(values[0]!.length);
    return pool.query(text, values);
  };
  return { pool: { query } as unknown as pg.Pool, batches };
}

async function payloadRows(ids: readonly number[]): Promise<unknown[]> {
  const { rows } = await db.pool.query(
    `select payload_id, status, dispatched, attempts, dead_letter_reason from asset_webhooks.payloads
     where payload_id = any($1) order by payload_id`, [ids]);
  return rows;
}

describe('settling attempts in batches', () => {
  it('writes a lone result at once and the results that finish meanwhile together, answering each', async () => {
    await webhooks([{ id: 'shop', concurrency: 10 }]);
    const ids = await payloads('shop', 10, 10);
    const { pool, batches } = counting(db.pool);
    const batcher = new SettleBatcher(pool, { maxInFlight: 1 });
    const answers = await Promise.all(ids.map((id) => batcher.settle(request(id))));
    expect(batches).toEqual([1, 9]);
    expect(answers).toEqual(ids.map(() => ({ applied: true, next: null })));
    const { rows } = await db.pool.query(
      "select count(*)::int as n from asset_webhooks.payloads where status = 'delivered' and not dispatched and payload_id = any($1)", [ids]);
    expect(rows[0]).toEqual({ n: 10 });
    const attempts = await db.pool.query("select count(*)::int as n from asset_webhooks.attempts where outcome = 'delivered'");
    expect(attempts.rows[0]).toEqual({ n: 10 });
  });

  it('keeps batches within maxBatch', async () => {
    await webhooks([{ id: 'shop', concurrency: 12 }]);
    const ids = await payloads('shop', 12, 12);
    const { pool, batches } = counting(db.pool);
    const batcher = new SettleBatcher(pool, { maxInFlight: 1, maxBatch: 4 });
    await Promise.all(ids.map((id) => batcher.settle(request(id))));
    expect(batches).toEqual([1, 4, 4, 3]);
  });

  it('settles each result of one batch as alone: delivered, retry, rejected, superseded and chained', async () => {
    await webhooks([{ id: 'shop', concurrency: 5 }, { id: 'crm', concurrency: 1 }]);
    const shop = await payloads('shop', 8, 5);
    const crm = await payloads('crm', 2, 1);
    // An operator's redelivery moved shop[3] to series 2 while its attempt of series 1 was in flight.
    await db.pool.query('update asset_webhooks.payloads set series = 2, attempts = 0 where payload_id = $1', [shop[3]]);
    const retryAt = new Date(Date.now() + 60_000);
    const { pool, batches } = counting(db.pool);
    const batcher = new SettleBatcher(pool, { maxInFlight: 1 });
    // Alone and not chained: it hands its slot off to shop[5] with a job.
    const first = batcher.settle(request(shop[4]!));
    const answers = await Promise.all([
      batcher.settle(request(shop[0]!, {}, { chain: true })),
      batcher.settle(request(shop[1]!, { statusCode: 503, outcome: 'retry' }, { retryAt })),
      batcher.settle(request(shop[2]!, { statusCode: 400, outcome: 'rejected' }, { chain: true })),
      batcher.settle(request(shop[3]!)),
      batcher.settle(request(crm[0]!, {}, { chain: true })),
    ]);
    await first;
    expect(batches).toEqual([1, 5]);
    // The two chained shop results took the next two shop payloads, one each, in order; crm its next.
    expect(answers.map((answer) => [answer.applied, answer.next?.payloadId ?? null, answer.next?.attemptNo ?? null])).toEqual([
      [true, shop[6], 1], [true, null, null], [true, shop[7], 1], [false, null, null], [true, crm[1], 1],
    ]);
    expect(answers[0]!.next!.body).toBe('{"n":7}');
    expect(await payloadRows([...shop, ...crm])).toEqual([
      { payload_id: shop[0], status: 'delivered', dispatched: false, attempts: 1, dead_letter_reason: null },
      { payload_id: shop[1], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
      { payload_id: shop[2], status: 'dead_lettered', dispatched: false, attempts: 1, dead_letter_reason: 'rejected' },
      { payload_id: shop[3], status: 'pending', dispatched: true, attempts: 0, dead_letter_reason: null },
      { payload_id: shop[4], status: 'delivered', dispatched: false, attempts: 1, dead_letter_reason: null },
      { payload_id: shop[5], status: 'pending', dispatched: true, attempts: 0, dead_letter_reason: null },
      { payload_id: shop[6], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
      { payload_id: shop[7], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
      { payload_id: crm[0], status: 'delivered', dispatched: false, attempts: 1, dead_letter_reason: null },
      { payload_id: crm[1], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
    ]);
    const attempts = await db.pool.query<{ payload_id: number; outcome: string | null }>(
      'select payload_id, outcome from asset_webhooks.attempts order by payload_id, attempt_no');
    expect(attempts.rows).toEqual([
      { payload_id: shop[0], outcome: 'delivered' }, { payload_id: shop[1], outcome: 'retry' },
      { payload_id: shop[2], outcome: 'rejected' }, { payload_id: shop[3], outcome: 'retry' },
      { payload_id: shop[4], outcome: 'delivered' }, { payload_id: shop[6], outcome: null }, { payload_id: shop[7], outcome: null },
      { payload_id: crm[0], outcome: 'delivered' }, { payload_id: crm[1], outcome: null },
    ]);
    // The retry got its job at the policy's time; the handed-off payload a job of its own.
    const jobs = await db.pool.query<{ key: string; run_at: Date }>(
      "select key, run_at from graphile_worker.jobs where task_identifier = 'deliver' order by key");
    expect(jobs.rows.map((job) => job.key).sort()).toEqual([`deliver:${shop[1]}:1:2`, `deliver:${shop[5]}:1:1`].sort());
    const retryJob = jobs.rows.find((job) => job.key === `deliver:${shop[1]}:1:2`)!;
    expect(Math.abs(retryJob.run_at.getTime() - retryAt.getTime())).toBeLessThan(1000);
  });

  it('gives chained results of one batch only the slots their webhook has, and starts only what is due', async () => {
    await webhooks([{ id: 'shop', concurrency: 4 }, { id: 'crm', concurrency: 3 }, { id: 'cms', concurrency: 2 }]);
    const shop = await payloads('shop', 6, 4);
    const crm = await payloads('crm', 3, 2);
    const cms = await payloads('cms', 4, 2);
    // A reload lowered shop to 2 and disabled crm while their attempts were in flight.
    await webhooks([{ id: 'shop', concurrency: 2 }, { id: 'crm', concurrency: 3, enabled: false }, { id: 'cms', concurrency: 2 }]);
    // cms's next payload waits for a retry time an hour away.
    await db.pool.query("update asset_webhooks.payloads set next_attempt_at = now() + interval '1 hour' where payload_id = $1", [cms[2]]);
    const chained = [shop[0]!, shop[1]!, shop[2]!, crm[0]!, crm[1]!, cms[0]!, cms[1]!];
    const answers = await settleAttempts(db.pool, chained.map((id) => request(id, {}, { chain: true })));
    expect(answers.every((answer) => answer.applied)).toBe(true);
    // Alone, one at a time, shop's three results would free slots until one is below its new concurrency:
    // with shop[3] still in flight, one next payload. crm takes none. cms's first result takes the
    // payload that is not due (it gets a job), its second the one after, which it starts.
    expect(answers.map((answer) => answer.next?.payloadId ?? null)).toEqual([shop[4], null, null, null, null, null, cms[3]]);
    expect(answers[6]!.next).toMatchObject({ webhookId: 'cms', series: 1, attemptNo: 1, body: '{"n":4}' });
    expect(await payloadRows([shop[4]!, shop[5]!, crm[2]!, cms[2]!, cms[3]!])).toEqual([
      { payload_id: shop[4], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
      { payload_id: shop[5], status: 'pending', dispatched: false, attempts: 0, dead_letter_reason: null },
      { payload_id: crm[2], status: 'pending', dispatched: false, attempts: 0, dead_letter_reason: null },
      { payload_id: cms[2], status: 'pending', dispatched: true, attempts: 0, dead_letter_reason: null },
      { payload_id: cms[3], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
    ]);
    // The payload that is not due got a job at its retry time, as from hand_off; the started ones an open attempt each.
    const jobs = await db.pool.query<{ key: string }>("select key from graphile_worker.jobs where task_identifier = 'deliver'");
    expect(jobs.rows.map((job) => job.key)).toEqual([`deliver:${cms[2]}:1:1`]);
    const open = await db.pool.query<{ payload_id: number }>('select payload_id from asset_webhooks.attempts where outcome is null order by payload_id');
    expect(open.rows.map((row) => row.payload_id)).toEqual([shop[3], shop[4], cms[3]]);
  });

  it('settles a payload named twice in one batch as two results one after the other', async () => {
    await webhooks([{ id: 'shop', concurrency: 2 }]);
    const ids = await payloads('shop', 3, 2);
    const answers = await settleAttempts(db.pool, [request(ids[0]!, {}, { chain: true }), request(ids[0]!, {}, { chain: true })]);
    // The first applies and takes the next payload; the second finds the payload delivered already.
    expect(answers.map((answer) => [answer.applied, answer.next?.payloadId ?? null])).toEqual([[true, ids[2]], [false, null]]);
    const attempts = await db.pool.query('select outcome from asset_webhooks.attempts where payload_id = $1', [ids[0]]);
    expect(attempts.rows).toEqual([{ outcome: 'retry' }]);
  });

  it('fails every result of a failing batch and changes nothing; the next batch is written', async () => {
    await webhooks([{ id: 'shop', concurrency: 3 }]);
    const ids = await payloads('shop', 3, 3);
    const batcher = new SettleBatcher(db.pool, { maxInFlight: 1 });
    const first = batcher.settle(request(ids[0]!));
    // An outcome the attempts table refuses fails the statement, and with it its whole batch.
    const failing = [
      batcher.settle(request(ids[1]!)),
      batcher.settle(request(ids[2]!, { outcome: 'lost' as AttemptResult['outcome'] })),
    ];
    await expect(first).resolves.toEqual({ applied: true, next: null });
    for (const result of await Promise.allSettled(failing)) {
      expect(result).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(/attempts_outcome_check/) } });
    }
    expect(await payloadRows(ids.slice(1))).toEqual([
      { payload_id: ids[1], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
      { payload_id: ids[2], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
    ]);
    await expect(batcher.settle(request(ids[1]!))).resolves.toEqual({ applied: true, next: null });
  });

  it('reads only the payloads it settles and takes, whatever the statistics say', async () => {
    await webhooks([{ id: 'crm', concurrency: 32 }]);
    // Statistics taken while the table was empty, as after a quiet night: the
    // plans made on the next connection must still look the payloads up by id.
    await db.pool.query('analyze asset_webhooks.payloads');
    const ids = await payloads('crm', 2000, 1);
    const rowsRead = async (): Promise<number> => {
      const { rows } = await db.pool.query<{ n: string }>(
        `select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n from pg_stat_user_tables where relid = 'asset_webhooks.payloads'::regclass`);
      return Number(rows[0]!.n);
    };
    const fresh = new pg.Client({ connectionString: db.url });
    await fresh.connect();
    try {
      await fresh.query('select pg_stat_force_next_flush()');
      await db.pool.query('select pg_stat_force_next_flush()');
      const before = await rowsRead();
      const [settled] = await settleAttempts(fresh, [request(ids[0]!, {}, { chain: true })]);
      expect(settled!.next?.payloadId).toBe(ids[1]);
      await fresh.query('select pg_stat_force_next_flush()');
      // The settled payload, its next one and the webhook's in-flight index: a
      // few dozen row reads at most, where a plan that scans the table reads 2,000 or more.
      expect(await rowsRead() - before).toBeLessThan(100);
    } finally {
      await fresh.end();
    }
  });

  it('reads the head of a queue through its index when the statistics were taken with the whole backlog waiting', async () => {
    await webhooks([{ id: 'crm', concurrency: 4 }]);
    // Statistics taken while 2,000 payloads of one webhook waited, as after a
    // bulk import into a quiet table; then the first 1,500 were delivered.
    const ids = await payloads('crm', 2000, 0);
    await db.pool.query('analyze asset_webhooks.payloads');
    await db.pool.query(
      "update asset_webhooks.payloads set status = 'delivered', delivered_at = now() where payload_id = any($1)", [ids.slice(0, 1500)]);
    await db.pool.query(
      "update asset_webhooks.payloads set dispatched = true, attempts = 1, last_attempt_at = now() where payload_id = any($1)", [ids.slice(1500, 1502)]);
    await db.pool.query(
      'insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at) select id, 1, 1, now() from unnest($1::bigint[]) id',
      [ids.slice(1500, 1502)]);
    // Each way into the queue on a connection of its own, so each makes its
    // plans now, in a transaction whose own counts (pg_stat_xact_user_tables)
    // hold only what that call read, whatever other sessions flush meanwhile.
    const read: Record<string, number> = {};
    const measure = async (name: string, run: (client: pg.Client) => Promise<void>): Promise<void> => {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        await client.query('begin');
        await run(client);
        const { rows } = await client.query<{ n: string }>(
          `select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n from pg_stat_xact_user_tables
           where relid = 'asset_webhooks.payloads'::regclass`);
        read[name] = Number(rows[0]!.n);
        await client.query('commit');
      } finally {
        await client.end();
      }
    };
    await measure('settle_attempts', async (client) => {
      const [settled] = await settleAttempts(client, [request(ids[1500]!, {}, { chain: true })]);
      expect(settled!.next?.payloadId).toBe(ids[1502]);
    });
    await measure('settle_attempt', async (client) => {
      const { rows } = await client.query<{ next_payload_id: number }>(
        `select next_payload_id from asset_webhooks.settle_attempt($1, 1, 1, 3, 200, null, null, 'ok', 'delivered', now(), null, true, 86400)`,
        [ids[1501]]);
      expect(rows[0]!.next_payload_id).toBe(ids[1503]);
    });
    await measure('dispatch', async (client) => {
      const { rows } = await client.query<{ started: number }>("select asset_webhooks.dispatch('crm') as started");
      expect(rows[0]!.started).toBe(2);
    });
    // The few rows each touches, where reading the primary key from its start
    // steps over the 1,500 delivered payloads.
    const few = Object.fromEntries(Object.entries(read).map(([name, n]) => [name, n < 100 ? 'a few' : n]));
    expect(few).toEqual({ settle_attempts: 'a few', settle_attempt: 'a few', dispatch: 'a few' });
  });
});
