import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import {
  claimPayloads,
  completeAttempts,
  type AttemptResult,
  type SettleRequest,
} from '../../src/delivery/attempt-store.js';
import { Completer, STALLED_MS } from '../../src/delivery/completer.js';
import { syncWebhooks } from '../../src/service/service-state.js';
import { receiverConfig } from '../helpers/config.js';
import { holdSlots, PAYLOADS_WITH_SLOTS } from '../helpers/delivery.js';
import { resetData, silentLogger, TEST_PROCESS_ID } from '../helpers/seed.js';
import { heapRowsReadInTransaction } from '../helpers/rows-read.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Payloads' next states written several per statement (asset_webhooks.transition_payloads,
// sql/functions/transition_payloads.sql): each result must be settled
// exactly as it would have been alone, and a failing batch must change nothing.

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
});

/** `count` pending payloads of the webhook, the first `started` of them holding a slot with attempt 1 started. */
async function payloads(webhookId: string, count: number, started: number): Promise<number[]> {
  const { rows } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
     select $1, 'pending', '{"n":' || n || '}', 8, 1, '{}'::uuid[] from generate_series(1, $2::int) n
     returning payload_id`,
    [webhookId, count],
  );
  const ids = rows.map((row) => row.payload_id).sort((a, b) => a - b);
  await holdSlots(db.pool, ids.slice(0, started));
  return ids;
}

async function webhooks(list: ReadonlyArray<{ id: string; concurrency: number; enabled?: boolean }>): Promise<void> {
  await syncWebhooks(
    db.pool,
    parseConfigText(receiverConfig(list.map((w) => ({ ...w, url: 'http://127.0.0.1:9/' }))), 'test'),
    { processId: TEST_PROCESS_ID, logger: silentLogger },
  );
}

const ok: AttemptResult = {
  durationMs: 3,
  statusCode: 200,
  errorClass: null,
  errorMessage: null,
  responseExcerpt: 'ok',
  outcome: 'delivered',
};

function request(
  payloadId: number,
  result: Partial<AttemptResult> = {},
  options: { series?: number; retryInMs?: number } = {},
): SettleRequest {
  return {
    payload: { payloadId, series: options.series ?? 1 },
    attemptNo: 1,
    result: { ...ok, ...result },
    retryInMs: options.retryInMs ?? null,
    windowSeconds: null,
    receiverFailed: (result.outcome ?? 'delivered') === 'retry',
    holdWebhookForMs: null,
  };
}

/** The pool as transition_payloads sees it, noting the size of every batch written. */
function counting(pool: pg.Pool): { pool: pg.Pool; batches: number[] } {
  const batches: number[] = [];
  const query = (config: pg.QueryConfig<unknown[][]>): Promise<pg.QueryResult> => {
    if (config.text.includes('complete_attempts')) batches.push(config.values![0]!.length);
    return pool.query(config);
  };
  return { pool: { query } as unknown as pg.Pool, batches };
}

async function payloadRows(ids: readonly number[]): Promise<unknown[]> {
  const { rows } = await db.pool.query(
    `select p.payload_id, p.status, f.payload_id is not null as dispatched, p.attempts, p.dead_letter_reason
     from ${PAYLOADS_WITH_SLOTS} where p.payload_id = any($1) order by p.payload_id`,
    [ids],
  );
  return rows;
}

/** Runs `body` while another transaction (a coalescing chunk, say) holds the payload's row; `release` commits it. */
async function whileRowLocked(payloadId: number, body: (release: () => Promise<void>) => Promise<void>): Promise<void> {
  const chunk = await db.pool.connect();
  try {
    await chunk.query('begin');
    await chunk.query('select 1 from asset_webhooks.payloads where payload_id = $1 for update', [payloadId]);
    await body(async () => {
      await chunk.query('commit');
    });
  } finally {
    await chunk.query('rollback').catch(() => {});
    chunk.release();
  }
}

describe('settling attempts in batches', () => {
  it('writes a lone result at once and the results that finish meanwhile together, answering each', async () => {
    await webhooks([{ id: 'shop', concurrency: 10 }]);
    const ids = await payloads('shop', 10, 10);
    const { pool, batches } = counting(db.pool);
    const completer = new Completer(pool);
    const answers = await Promise.all(ids.map((id) => completer.settle(request(id))));
    // One statement in flight: the first alone, the rest together once it is written.
    expect(batches).toEqual([1, 9]);
    expect(answers).toEqual(ids.map(() => ({ applied: true })));
    const { rows } = await db.pool.query(
      `select count(*)::int as n from ${PAYLOADS_WITH_SLOTS}
       where p.status = 'delivered' and f.payload_id is null and p.payload_id = any($1)`,
      [ids],
    );
    expect(rows[0]).toEqual({ n: 10 });
    const attempts = await db.pool.query(
      "select count(*)::int as n from asset_webhooks.attempts where outcome = 'delivered'",
    );
    expect(attempts.rows[0]).toEqual({ n: 10 });
  });

  it('writes at most 64 results in one statement', async () => {
    await webhooks([
      { id: 'shop', concurrency: 64 },
      { id: 'crm', concurrency: 64 },
      { id: 'web', concurrency: 2 },
    ]);
    const ids = [
      ...(await payloads('shop', 64, 64)),
      ...(await payloads('crm', 64, 64)),
      ...(await payloads('web', 2, 2)),
    ];
    const { pool, batches } = counting(db.pool);
    const completer = new Completer(pool);
    await Promise.all(ids.map((id) => completer.settle(request(id))));
    expect(batches).toEqual([1, 64, 64, 1]);
  });

  it('writes a second statement beside one that waits on a row lock, so that wait holds up no other result', async () => {
    await webhooks([{ id: 'shop', concurrency: 2 }]);
    const ids = await payloads('shop', 2, 2);
    const { pool, batches } = counting(db.pool);
    const completer = new Completer(pool);
    await whileRowLocked(ids[0]!, async (release) => {
      const blocked = completer.settle(request(ids[0]!));
      // Starts once the first statement has run STALLED_MS, and is written while the lock is still held.
      await expect(completer.settle(request(ids[1]!))).resolves.toEqual({ applied: true });
      expect(batches).toEqual([1, 1]);
      await release();
      await expect(blocked).resolves.toEqual({ applied: true });
    });
    expect(await payloadRows(ids)).toEqual(
      ids.map((id) => ({
        payload_id: id,
        status: 'delivered',
        dispatched: false,
        attempts: 1,
        dead_letter_reason: null,
      })),
    );
  });

  it('never starts a statement beside a stalled one that records a standby sent', async () => {
    await webhooks([{ id: 'shop', concurrency: 2 }]);
    const ids = await payloads('shop', 3, 2);
    // The standby that replaced the second request (ended, its result not yet written).
    await holdSlots(db.pool, [ids[2]!], { sent: false });
    const { pool, batches } = counting(db.pool);
    const completer = new Completer(pool);
    await whileRowLocked(ids[0]!, async (release) => {
      completer.markSent({ payloadId: ids[2]!, series: 1, attemptNo: 1 });
      const blocked = completer.settle(request(ids[0]!));
      const replaced = completer.settle(request(ids[1]!));
      // Nothing to wait for: what is checked is that nothing starts. Long enough for a second
      // statement beside one without marks (the test above) to start several times over.
      await new Promise((resolve) => setTimeout(resolve, STALLED_MS * 4));
      expect(batches).toEqual([1]);
      // A claim now counts the standby's webhook as full: two requests sent, one the standby.
      const { rows } = await db.pool.query(
        "select count(*)::int as sent from asset_webhooks.in_flight where webhook_id = 'shop' and sent",
      );
      expect(rows).toEqual([{ sent: 2 }]);
      await release();
      await expect(Promise.all([blocked, replaced])).resolves.toEqual([{ applied: true }, { applied: true }]);
      expect(batches).toEqual([1, 1]);
    });
    const { rows } = await db.pool.query('select payload_id, sent from asset_webhooks.in_flight');
    expect(rows).toEqual([{ payload_id: ids[2], sent: true }]);
  });

  it('settles each result of one batch as alone: delivered, retry, rejected and superseded', async () => {
    await webhooks([
      { id: 'shop', concurrency: 5 },
      { id: 'crm', concurrency: 1 },
    ]);
    const shop = await payloads('shop', 6, 4);
    const crm = await payloads('crm', 2, 2);
    // An operator's redelivery moved shop[3] to series 2 while its attempt of series 1 was in flight.
    await db.pool.query('update asset_webhooks.payloads set series = 2, attempts = 0 where payload_id = $1', [shop[3]]);
    // Its slot went when it was dead-lettered first (webhook_removed), its attempt left open in the log.
    await db.pool.query(
      `with freed as (delete from asset_webhooks.in_flight where payload_id = $1 returning *)
       insert into asset_webhooks.attempt_log (payload_id, series, attempt_no, started_at)
       select payload_id, series, attempt_no, started_at from freed`,
      [shop[3]],
    );
    const { pool, batches } = counting(db.pool);
    const batcher = new Completer(pool);
    // One statement in flight: crm's second result and the four that come meanwhile go together.
    const first = Promise.all([batcher.settle(request(crm[0]!)), batcher.settle(request(crm[1]!))]);
    const answers = await Promise.all([
      batcher.settle(request(shop[0]!)),
      batcher.settle(request(shop[2]!, { statusCode: 400, outcome: 'rejected' })),
      batcher.settle(request(shop[1]!, { statusCode: 503, outcome: 'retry' }, { retryInMs: 60_000 })),
      batcher.settle(request(shop[3]!)),
    ]);
    await first;
    expect(batches).toEqual([1, 5]);
    expect(answers).toEqual([{ applied: true }, { applied: true }, { applied: true }, { applied: false }]);
    expect(await payloadRows([...shop.slice(0, 4), crm[0]!])).toEqual([
      { payload_id: shop[0], status: 'delivered', dispatched: false, attempts: 1, dead_letter_reason: null },
      { payload_id: shop[1], status: 'pending', dispatched: true, attempts: 1, dead_letter_reason: null },
      { payload_id: shop[2], status: 'dead_lettered', dispatched: false, attempts: 1, dead_letter_reason: 'rejected' },
      { payload_id: shop[3], status: 'pending', dispatched: false, attempts: 0, dead_letter_reason: null },
      { payload_id: crm[0], status: 'delivered', dispatched: false, attempts: 1, dead_letter_reason: null },
    ]);
    const {
      rows: [retry],
    } = await db.pool.query<{ in_s: number }>(
      'select round(extract(epoch from next_attempt_at - asset_webhooks.now()))::int as in_s from asset_webhooks.in_flight where payload_id = $1',
      [shop[1]],
    );
    // Due its delay after the database's clock when the batch was written.
    expect(retry!.in_s).toBe(60);
    // The superseded attempt's result is kept as a plain failed try.
    const { rows: superseded } = await db.pool.query(
      'select outcome, status_code from asset_webhooks.attempts where payload_id = $1',
      [shop[3]],
    );
    expect(superseded).toEqual([{ outcome: 'retry', status_code: 200 }]);
    // The latest verdict of the batch is the webhook's health: shop failed last.
    const { rows: health } = await db.pool.query(
      'select webhook_id, failing_since is not null as failing from asset_webhooks.webhooks order by webhook_id',
    );
    expect(health).toEqual([
      { webhook_id: 'crm', failing: false },
      { webhook_id: 'shop', failing: true },
    ]);
  });

  it('records the standbys marked sent in its next statement, their start moved to when that was written', async () => {
    await webhooks([{ id: 'shop', concurrency: 2 }]);
    const ids = await payloads('shop', 2, 2);
    await db.pool.query(
      "update asset_webhooks.in_flight set sent = false, started_at = now() - interval '1 minute' where payload_id = $1",
      [ids[1]],
    );
    const completer = new Completer(db.pool);
    completer.markSent({ payloadId: ids[1]!, series: 1, attemptNo: 1 });
    await completer.settle(request(ids[0]!));
    const { rows } = await db.pool.query(
      `select payload_id, sent, outcome, started_at > now() - interval '30 seconds' as started_lately
       from asset_webhooks.attempts order by payload_id`,
    );
    expect(rows).toEqual([
      { payload_id: ids[0], sent: true, outcome: 'delivered', started_lately: true },
      { payload_id: ids[1], sent: true, outcome: null, started_lately: true },
    ]);
  });

  it('settles a payload named twice in one batch once: the second finds it settled', async () => {
    await webhooks([{ id: 'shop', concurrency: 2 }]);
    const ids = await payloads('shop', 3, 2);
    const answers = await completeAttempts(db.pool, [request(ids[0]!), request(ids[0]!)]);
    expect(answers.filter((answer) => answer.applied)).toHaveLength(1);
    const attempts = await db.pool.query('select outcome from asset_webhooks.attempts where payload_id = $1', [ids[0]]);
    expect(attempts.rows).toEqual([{ outcome: 'delivered' }]);
  });

  it('writes the other results of a batch one of which the database refuses; the refused one gets the error', async () => {
    await webhooks([{ id: 'shop', concurrency: 3 }]);
    const ids = await payloads('shop', 4, 4);
    const batcher = new Completer(db.pool);
    const first = batcher.settle(request(ids[0]!));
    const firstToo = batcher.settle(request(ids[3]!));
    // An outcome the attempts table refuses fails the statement; written alone, and as unrecordable, it still fails.
    const second = batcher.settle(request(ids[1]!));
    const refused = batcher.settle(request(ids[2]!, { outcome: 'lost' as AttemptResult['outcome'] }));
    await expect(first).resolves.toEqual({ applied: true });
    await expect(firstToo).resolves.toEqual({ applied: true });
    await expect(second).resolves.toEqual({ applied: true });
    await expect(refused).rejects.toThrow(/attempts_outcome_check/);
    expect(await payloadRows(ids.slice(1, 3))).toEqual([
      { payload_id: ids[1], status: 'delivered', dispatched: false, attempts: 1, dead_letter_reason: null },
      { payload_id: ids[2], status: 'pending', dispatched: true, attempts: 0, dead_letter_reason: null },
    ]);
    await expect(batcher.settle(request(ids[2]!))).resolves.toEqual({ applied: true });
  });

  it('records a result the database refuses as an unrecordable failed attempt, and writes the rest of its batch', async () => {
    await webhooks([{ id: 'shop', concurrency: 9 }]);
    const ids = await payloads('shop', 9, 9);
    const { pool, batches } = counting(db.pool);
    const batcher = new Completer(pool);
    // Held back by the first statement, the other eight go together in one batch.
    const first = Promise.all([batcher.settle(request(ids[0]!)), batcher.settle(request(ids[8]!))]);
    const rest = ids.slice(1, 8).map((id, index) => {
      if (index === 2)
        // A retry delay that is no number (22007 in the database).
        return batcher.settle(
          request(id, { statusCode: 503, outcome: 'retry', responseExcerpt: 'busy' }, { retryInMs: Number.NaN }),
        );
      if (index === 4)
        // A number no integer column holds (22003).
        return batcher.settle(
          request(id, { durationMs: 2 ** 40, statusCode: 500, outcome: 'retry' }, { retryInMs: 60_000 }),
        );
      return batcher.settle(request(id));
    });
    await expect(first).resolves.toEqual([{ applied: true }, { applied: true }]);
    expect(await Promise.all(rest)).toEqual(rest.map(() => ({ applied: true })));
    // The batch of eight, then each alone, then the two refused ones as unrecordable.
    expect(batches).toEqual([1, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    const { rows } = await db.pool.query<{
      payload_id: number;
      status: string;
      dispatched: boolean;
      due: boolean | null;
      outcome: string;
      status_code: number | null;
      duration_ms: number | null;
      error_class: string | null;
      error_message: string | null;
      response_excerpt: string | null;
    }>(
      `select p.payload_id, p.status, f.payload_id is not null as dispatched, f.next_attempt_at <= now() as due,
              a.outcome, a.status_code, a.duration_ms, a.error_class, a.error_message, a.response_excerpt
       from ${PAYLOADS_WITH_SLOTS} join asset_webhooks.attempts a on a.payload_id = p.payload_id
       order by p.payload_id`,
    );
    expect(rows.filter((row) => row.status === 'delivered').map((row) => row.payload_id)).toEqual(
      ids.filter((_, index) => index !== 3 && index !== 5),
    );
    const [nan, huge] = [rows.find((row) => row.payload_id === ids[3]), rows.find((row) => row.payload_id === ids[5])];
    // Each goes on with its schedule: retried (at once when its time was not a date), its attempt closed as failed with the reason.
    expect(nan).toMatchObject({
      status: 'pending',
      dispatched: true,
      due: true,
      outcome: 'retry',
      status_code: 503,
      error_class: 'unrecordable',
      response_excerpt: null,
    });
    expect(nan!.error_message).toMatch(/^the attempt's result \(status 503\) could not be recorded: .*22007/);
    expect(huge).toMatchObject({
      status: 'pending',
      dispatched: true,
      due: false,
      outcome: 'retry',
      status_code: 500,
      duration_ms: null,
      error_class: 'unrecordable',
    });
    expect(huge!.error_message).toMatch(/out of range.*22003/);
    const open = await db.pool.query('select 1 from asset_webhooks.attempts where outcome is null');
    expect(open.rows).toEqual([]);
  });

  it('stores what a receiver answered whatever its bytes: NUL and lone surrogates are replaced', async () => {
    await webhooks([{ id: 'shop', concurrency: 2 }]);
    const ids = await payloads('shop', 2, 2);
    await completeAttempts(db.pool, [
      request(ids[0]!, { responseExcerpt: 'ok\u0000!' }),
      request(ids[1]!, {
        statusCode: 500,
        outcome: 'retry',
        responseExcerpt: 'error\u0000page \ud800',
        errorMessage: 'bad\u0000',
      }),
    ]);
    const { rows } = await db.pool.query(
      'select p.status, a.response_excerpt, a.error_message from asset_webhooks.payloads p join asset_webhooks.attempts a using (payload_id) order by payload_id',
    );
    expect(rows).toEqual([
      { status: 'delivered', response_excerpt: 'ok\ufffd!', error_message: null },
      { status: 'pending', response_excerpt: 'error\ufffdpage \ufffd', error_message: 'bad\ufffd' },
    ]);
  });

  it('reads only the payloads it settles, whatever the statistics say', async () => {
    await webhooks([{ id: 'crm', concurrency: 32 }]);
    // Statistics taken while the table was empty, as after a quiet night: the
    // plans made on the next connection must still look the payloads up by id.
    await db.pool.query('analyze asset_webhooks.payloads');
    const ids = await payloads('crm', 2000, 1);
    const fresh = new pg.Client({ connectionString: db.url });
    await fresh.connect();
    try {
      // The counts read in a transaction are those not yet flushed: flush them first.
      await fresh.query('select pg_stat_force_next_flush()');
      await fresh.query('begin');
      const [settled] = await completeAttempts(fresh, [request(ids[0]!)]);
      expect(settled!.applied).toBe(true);
      // The settled payload and its attempt: a few dozen row reads at most,
      // where a plan that scans the table reads 2,000 or more.
      expect(await heapRowsReadInTransaction(fresh)).toBeLessThan(100);
      await fresh.query('commit');
    } finally {
      await fresh.end();
    }
  });

  it('claims the head of a queue through its index when the statistics were taken with the whole backlog waiting', async () => {
    await webhooks([{ id: 'crm', concurrency: 4 }]);
    // Statistics taken while 2,000 payloads of one webhook waited, as after a
    // bulk import into a quiet table; then the first 1,500 were delivered.
    const ids = await payloads('crm', 2000, 0);
    await db.pool.query('analyze asset_webhooks.payloads');
    await db.pool.query(
      "update asset_webhooks.payloads set status = 'delivered', delivered_at = now() where payload_id = any($1)",
      [ids.slice(0, 1500)],
    );
    await holdSlots(db.pool, ids.slice(1500, 1502));
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
           where relid = 'asset_webhooks.payloads'::regclass`,
        );
        read[name] = Number(rows[0]!.n);
        await client.query('commit');
      } finally {
        await client.end();
      }
    };
    await measure('claim_payloads', async (client) => {
      const claimed = await claimPayloads(client, {
        now: new Date(),
        max: 10,
        share: 10,
        after: null,
        expireAfterSeconds: 86_400,
      });
      expect(claimed.map((payload) => payload.payloadId)).toEqual([ids[1502], ids[1503]]);
    });
    // The few rows it touches, where reading the primary key from its start
    // steps over the 1,500 delivered payloads.
    const few = Object.fromEntries(Object.entries(read).map(([name, n]) => [name, n < 100 ? 'a few' : n]));
    expect(few).toEqual({ claim_payloads: 'a few' });
  });
});
