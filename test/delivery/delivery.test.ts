import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { redeliver } from '../../src/investigate/dead-letters.js';
import { createLogger } from '../../src/logging/logger.js';
import { receiverConfig, type TestConfigOptions, type TestWebhook } from '../helpers/config.js';
import { openWebhook, resetData, runCoalesce } from '../helpers/seed.js';
import { answerAfter, eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
let receivers: TestReceiver[] = [];
let running: TestService | undefined;

beforeEach(async () => {
  await resetData(db.pool);
});
afterEach(async () => {
  await running?.stop();
  running = undefined;
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

async function receiver(): Promise<TestReceiver> {
  const started = await startTestReceiver();
  receivers.push(started);
  return started;
}

/** Coalescing every second; a 2-second request timeout, which the hanging receiver's test relies on. */
function config(webhooks: readonly TestWebhook[], retry?: TestConfigOptions['retry']): string {
  return receiverConfig(webhooks, { requestTimeoutSeconds: 2, retry });
}

interface PayloadRow {
  payload_id: number;
  status: string;
  attempts: number;
  dead_letter_reason: string | null;
  body: string;
}

async function payloadRows(): Promise<PayloadRow[]> {
  const { rows } = await db.pool.query<PayloadRow>(
    'select payload_id, status, attempts, dead_letter_reason, body from asset_webhooks.payloads order by payload_id',
  );
  return rows;
}

async function attemptTimes(payloadId: number): Promise<number[]> {
  const { rows } = await db.pool.query<{ started_at: Date }>(
    'select started_at from asset_webhooks.attempts where payload_id = $1 order by attempt_no',
    [payloadId],
  );
  return rows.map((row) => row.started_at.getTime());
}

async function settled(count: number): Promise<PayloadRow[]> {
  return eventually(
    async () => {
      const rows = await payloadRows();
      return rows.length >= count && rows.every((row) => row.status === 'delivered' || row.status === 'dead_lettered')
        ? rows
        : undefined;
    },
    { timeoutMs: 30_000, what: `${count} payloads delivered or dead-lettered` },
  );
}

describe('delivery through the running service', () => {
  it('POSTs the stored body with Content-Type, the API key and the configured headers', async () => {
    const crm = await receiver();
    process.env.ASSET_WEBHOOKS_SECRET_CRM_KEY = 'the-secret-value';
    running = await startTestService(
      db.url,
      config([{ id: 'crm', url: crm.url, apikey: 'crm-key', headers: { 'X-Tenant': 'acme' } }]),
    );
    await db.pool.query('insert into assets (asset_id) values (1)');
    const [payload] = await settled(1);
    expect(payload!.status).toBe('delivered');
    const [request] = crm.requests;
    expect(request!.method).toBe('POST');
    expect(request!.path).toBe('/hook');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['x-api-key']).toBe('the-secret-value');
    expect(request!.headers['x-tenant']).toBe('acme');
    expect(request!.body).toBe(payload!.body);
    const { rows } = await db.pool.query('select status_code, outcome from asset_webhooks.attempts');
    expect(rows).toEqual([{ status_code: 200, outcome: 'delivered' }]);
    const { rows: secretLeaks } = await db.pool.query(
      "select count(*)::int as n from asset_webhooks.attempts a where coalesce(a.error_message, '') || coalesce(a.response_excerpt, '') like '%the-secret-value%'",
    );
    expect(secretLeaks).toEqual([{ n: 0 }]);
  });

  it('sends no X-API-Key when no apikey is configured', async () => {
    const open = await receiver();
    running = await startTestService(db.url, config([{ id: 'open', url: open.url }]));
    await db.pool.query('insert into assets (asset_id) values (1)');
    await settled(1);
    expect(open.requests[0]!.headers['x-api-key']).toBeUndefined();
  });

  it('dead-letters a 4xx at once as rejected, without retrying', async () => {
    const picky = await receiver();
    picky.respond = () => 422;
    running = await startTestService(db.url, config([{ id: 'picky', url: picky.url }]));
    await db.pool.query('insert into assets (asset_id) values (1)');
    const [payload] = await settled(1);
    expect(payload).toMatchObject({ status: 'dead_lettered', dead_letter_reason: 'rejected', attempts: 1 });
    const { rows } = await db.pool.query(
      'select reason, attempts, last_status_code, event_count from asset_webhooks.dead_letters',
    );
    expect(rows).toEqual([{ reason: 'rejected', attempts: 1, last_status_code: 422, event_count: 1 }]);
  });

  it('retries on the configured schedule with the same body, then dead-letters as retries_exhausted', async () => {
    const down = await receiver();
    down.respond = () => 503;
    running = await startTestService(db.url, config([{ id: 'down', url: down.url }], { delaysSeconds: [1, 2] }));
    await db.pool.query('insert into assets (asset_id) values (1)');
    const [payload] = await settled(1);
    expect(payload).toMatchObject({ status: 'dead_lettered', dead_letter_reason: 'retries_exhausted', attempts: 3 });
    expect(new Set(down.requests.map((r) => r.body))).toEqual(new Set([payload!.body]));
    const times = await attemptTimes(payload!.payload_id);
    expect(times).toHaveLength(3);
    // Never earlier than the schedule says (later is allowed: the worker polls).
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(1000);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(2000);
  });

  it('expires a payload still undelivered deadLetterAfterSeconds after creation', async () => {
    const down = await receiver();
    down.respond = () => 500;
    running = await startTestService(
      db.url,
      config([{ id: 'down', url: down.url }], {
        delaysSeconds: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        deadLetterAfterSeconds: 3,
      }),
    );
    await db.pool.query('insert into assets (asset_id) values (1)');
    const [payload] = await settled(1);
    expect(payload).toMatchObject({ status: 'dead_lettered', dead_letter_reason: 'expired' });
    expect(payload!.attempts).toBeLessThan(10);
    // When the window has passed, not when the next retry would fall after it.
    const {
      rows: [window],
    } = await db.pool.query<{ ms: number }>(
      'select extract(epoch from dead_lettered_at - series_started_at) * 1000 as ms from asset_webhooks.payloads where payload_id = $1',
      [payload!.payload_id],
    );
    expect(Number(window!.ms)).toBeGreaterThanOrEqual(3000);
  });

  it('sends a payload only after the previous one of the webhook is delivered (concurrency 1)', async () => {
    const crm = await receiver();
    crm.respond = (_request, index) => (index < 2 ? 503 : 200);
    running = await startTestService(
      db.url,
      config([{ id: 'crm', url: crm.url, batchSize: 1 }], { delaysSeconds: [1, 1, 1] }),
    );
    await db.pool.query('insert into assets (asset_id) values (1), (2), (3)');
    await settled(3);
    const assetIds = crm.requests.map(
      (r) => (JSON.parse(r.body) as { events: Array<{ assetId: number }> }).events[0]!.assetId,
    );
    expect(assetIds).toEqual([1, 1, 1, 2, 3]);
  });

  it('starts payloads a run added while every slot was busy, when those deliveries ended before the run committed', async () => {
    const shop = await receiver();
    let answerFirst: (status: number) => void = () => {};
    shop.respond = (_request, index) => (index === 0 ? new Promise<number>((resolve) => (answerFirst = resolve)) : 200);
    // No interval run within the test: the runs are this test's own coalesce() calls.
    running = await startTestService(
      db.url,
      receiverConfig([{ id: 'shop', url: shop.url, batchSize: 1 }], { intervalSeconds: 3600 }),
    );
    const webhooks = [openWebhook('shop', { batchSize: 1 })];
    await db.pool.query('insert into assets (asset_id) values (1)');
    await runCoalesce(db.pool, webhooks);
    await shop.waitFor(1);

    // The next run's chunk stops after its own dispatch (which finds the one slot busy), before it commits.
    const holder = await db.pool.connect();
    try {
      await holder.query('select pg_advisory_lock(4242)');
      await db.pool.query(`create or replace function public.aw_test_hold() returns trigger language plpgsql as $$
        begin perform pg_advisory_xact_lock(4242); return new; end $$`);
      await db.pool.query(`create trigger aw_test_hold before update on asset_webhooks.coalesce_runs
        for each row when (new.events > old.events) execute function public.aw_test_hold()`);
      await db.pool.query('insert into assets (asset_id) values (2)');
      const second = runCoalesce(db.pool, webhooks);
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            "select count(*)::int as n from pg_locks where locktype = 'advisory' and objid = 4242 and not granted and database = (select oid from pg_database where datname = current_database())",
          );
          return rows[0]!.n > 0 ? true : undefined;
        },
        { timeoutMs: 10_000, what: 'the chunk to wait before its commit' },
      );
      // The delivery in the busy slot ends meanwhile: its settle cannot see the chunk's payload.
      answerFirst(200);
      await eventually(
        async () => {
          const rows = await payloadRows();
          return rows.some((row) => row.status === 'delivered') ? true : undefined;
        },
        { timeoutMs: 10_000, what: 'the first payload delivered' },
      );
      await holder.query('select pg_advisory_unlock(4242)');
      await second;
    } finally {
      holder.release();
      await db.pool.query('drop trigger if exists aw_test_hold on asset_webhooks.coalesce_runs');
      await db.pool.query('drop function if exists public.aw_test_hold()');
    }
    const rows = await settled(2);
    expect(rows.map((row) => row.status)).toEqual(['delivered', 'delivered']);
    expect(shop.requests).toHaveLength(2);
  });

  it('does not let a hanging receiver delay another webhook', async () => {
    const hanging = await receiver();
    hanging.respond = () => 'hang';
    const fast = await receiver();
    running = await startTestService(
      db.url,
      config(
        [
          { id: 'hanging', url: hanging.url },
          { id: 'fast', url: fast.url },
        ],
        { delaysSeconds: [60] },
      ),
    );
    await db.pool.query('insert into assets (asset_id) values (1)');
    await hanging.waitFor(1);
    await fast.waitFor(1);
    // The fast receiver got its payload while the hanging one still held its request.
    expect(fast.requests[0]!.at - hanging.requests[0]!.at).toBeLessThan(2000);
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ error_class: string }>(
          "select error_class from asset_webhooks.attempts a join asset_webhooks.payloads p using (payload_id) where p.webhook_id = 'hanging' and a.outcome is not null",
        );
        return rows[0]?.error_class === 'timeout' ? true : undefined;
      },
      { timeoutMs: 10_000, what: 'the hanging attempt to time out' },
    );
  });

  it('keeps payloads of a disabled webhook waiting and sends them once it is enabled again', async () => {
    const crm = await receiver();
    const retry = { delaysSeconds: [1, 1, 1, 1, 1] };
    const enabled = config([{ id: 'crm', url: crm.url }], retry);
    running = await startTestService(db.url, enabled);
    crm.respond = () => 503;
    await db.pool.query('insert into assets (asset_id) values (1)');
    await crm.waitFor(1);
    running.writeConfig(config([{ id: 'crm', url: crm.url, enabled: false }], retry));
    expect(await running.service.reload()).toBe(true);
    await db.pool.query('insert into assets (asset_id) values (2)');
    // The retry comes due while the webhook is disabled: the payload waits, it is not sent.
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ overdue: boolean }>(
          "select next_attempt_at < now() - interval '2 seconds' as overdue from asset_webhooks.in_flight",
        );
        return rows[0]?.overdue === true ? true : undefined;
      },
      { timeoutMs: 10_000, what: 'the retry to be two seconds overdue' },
    );
    expect(crm.requests).toHaveLength(1);
    crm.respond = () => 200;
    running.writeConfig(enabled);
    expect(await running.service.reload()).toBe(true);
    const rows = await settled(1);
    expect(rows.map((row) => row.status)).toEqual(['delivered']);
    // The event that occurred while disabled was not delivered later.
    const { rows: outcomes } = await db.pool.query(
      'select asset_id, outcome, excluded_by from asset_webhooks.event_outcomes order by asset_id',
    );
    expect(outcomes).toEqual([
      { asset_id: 1, outcome: 'delivered', excluded_by: null },
      { asset_id: 2, outcome: 'excluded', excluded_by: 'disabled' },
    ]);
  });

  it('keeps running on the old configuration when a reload finds it invalid', async () => {
    const crm = await receiver();
    running = await startTestService(db.url, config([{ id: 'crm', url: crm.url }]));
    running.writeConfig('assetUpdater:\n  webhooks:\n    - { id: crm, url: "not a url", enabled: maybe }\n');
    expect(await running.service.reload()).toBe(false);
    await db.pool.query('insert into assets (asset_id) values (1)');
    await settled(1);
    expect(crm.requests).toHaveLength(1);
  });

  it('after a 401 and a key rotation, the redelivery uses the rotated key; logs never show a key', async () => {
    const crm = await receiver();
    crm.respond = (request) => (request.headers['x-api-key'] === 'rotated-key' ? 200 : 401);
    process.env.ASSET_WEBHOOKS_SECRET_ROTATING = 'old-key';
    let logs = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs += chunk.toString();
        done();
      },
    });
    running = await startTestService(db.url, config([{ id: 'crm', url: crm.url, apikey: 'rotating' }]), {
      logger: createLogger({ level: 'trace', destination: sink }),
    });
    await db.pool.query('insert into assets (asset_id) values (1)');
    const [rejected] = await settled(1);
    expect(rejected).toMatchObject({ status: 'dead_lettered', dead_letter_reason: 'rejected' });
    process.env.ASSET_WEBHOOKS_SECRET_ROTATING = 'rotated-key';
    await redeliver(db.pool, rejected!.payload_id, 'test');
    const [delivered] = await settled(1);
    expect(delivered!.status).toBe('delivered');
    expect(crm.requests.map((r) => r.headers['x-api-key'])).toEqual(['old-key', 'rotated-key']);
    expect(logs).toContain('payload delivered');
    expect(logs).not.toContain('old-key');
    expect(logs).not.toContain('rotated-key');
    const { rows } = await db.pool.query(
      "select count(*)::int as n from asset_webhooks.attempts where coalesce(error_message, '') || coalesce(response_excerpt, '') like '%-key%'",
    );
    expect(rows).toEqual([{ n: 0 }]);
  });

  it('keeps at most `concurrency` payloads of a webhook in flight, and uses them', async () => {
    const crm = await receiver();
    const concurrent = answerAfter(crm, 300);
    running = await startTestService(db.url, config([{ id: 'crm', url: crm.url, batchSize: 1, concurrency: 3 }]));
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 12) g');
    await settled(12);
    expect(crm.requests).toHaveLength(12);
    expect(concurrent.most()).toBe(3);
  });

  it("keeps a full payload's event ids out of line, where delivery's row versions only point at them", async () => {
    const crm = await receiver();
    running = await startTestService(db.url, config([{ id: 'crm', url: crm.url }]));
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 100) g');
    const [payload] = await settled(1);
    expect(payload!.status).toBe('delivered');
    const {
      rows: [ids],
    } = await db.pool.query<{ count: number; size: number; same: boolean }>(
      `select cardinality(event_ids) as count, pg_column_size(event_ids) as size,
              (select array_agg(e order by e) from unnest(event_ids) e)
                = (select array_agg(event_id order by event_id) from asset_webhooks.events) as same
       from asset_webhooks.payloads`,
    );
    expect(ids).toMatchObject({ count: 100, same: true });
    expect(ids!.size).toBeGreaterThanOrEqual(1600);
    // After two updates (attempt started, delivered) a value of exactly the ids'
    // size is in the table's TOAST relation: the row holds only a pointer to it.
    const {
      rows: [toast],
    } = await db.pool.query<{ name: string }>(
      "select reltoastrelid::regclass::text as name from pg_class where oid = 'asset_webhooks.payloads'::regclass",
    );
    const { rows: values } = await db.pool.query<{ bytes: number }>(
      `select sum(octet_length(chunk_data))::int as bytes from ${toast!.name} group by chunk_id`,
    );
    expect(values.map((value) => value.bytes)).toContain(ids!.size);
  });
});
