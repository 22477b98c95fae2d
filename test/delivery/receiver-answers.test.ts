import type { ServerResponse } from 'node:http';
import { parse, stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimPayloads, type ClaimedPayload } from '../../src/delivery/attempt-store.js';
import { deliverClaimed } from '../../src/delivery/deliver.js';
import { receiverConfig } from '../helpers/config.js';
import { insertPayloads, PAYLOADS_WITH_SLOTS, testDelivery, type TestDelivery } from '../helpers/delivery.js';
import { httpServer, readBody, type LocalServer } from '../helpers/http-servers.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Whatever a receiver answers is recorded as data, with a real receiver and
// the real database: the attempt is closed, the payload goes on with its
// schedule, and Retry-After counts only when retry.honorRetryAfter says so.

const db = useTestDatabase();
let server: LocalServer | undefined;
let delivery: TestDelivery | undefined;
let answer: (response: ServerResponse) => void = (response) => response.end();

beforeEach(async () => {
  await resetData(db.pool);
  server = await httpServer((request, response) => {
    void readBody(request).then(() => answer(response));
  });
});
afterEach(async () => {
  await delivery?.close();
  delivery = undefined;
  await server?.close();
  server = undefined;
});

async function setUp(retry: Record<string, unknown> = {}): Promise<TestDelivery> {
  const document = parse(
    receiverConfig([{ id: 'crm', url: `${server!.origin}/hook` }], { requestTimeoutSeconds: 2 }),
  ) as {
    assetUpdater: Record<string, unknown>;
  };
  document.assetUpdater.retry = { delaysSeconds: [60, 120], ...retry };
  delivery = await testDelivery(db.pool, stringify(document));
  return delivery;
}

/** Claims the webhook's one payload and makes its attempt. */
async function attemptOnce(context: TestDelivery['context']): Promise<void> {
  await insertPayloads(db.pool, 'crm', 1);
  const claimed: ClaimedPayload[] = await claimPayloads(db.pool, {
    now: new Date(),
    max: 1,
    share: 1,
    after: null,
    expireAfterSeconds: 86_400,
  });
  expect(claimed).toHaveLength(1);
  await deliverClaimed(claimed[0]!, context);
}

interface Recorded {
  status: string;
  next_in_s: number | null;
  hold_in_s: number | null;
  outcome: string | null;
  status_code: number | null;
  error_class: string | null;
  response_excerpt: string | null;
}

async function recorded(): Promise<Recorded> {
  const { rows } = await db.pool.query<Recorded>(
    `select p.status, round(extract(epoch from f.next_attempt_at - now()))::int as next_in_s,
            round(extract(epoch from w.hold_until - now()))::int as hold_in_s,
            a.outcome, a.status_code, a.error_class, a.response_excerpt
     from ${PAYLOADS_WITH_SLOTS} join asset_webhooks.attempts a on a.payload_id = p.payload_id
     join asset_webhooks.webhooks w on w.webhook_id = p.webhook_id`,
  );
  expect(rows).toHaveLength(1);
  return rows[0]!;
}

describe('response bodies a receiver sends', () => {
  it('a 500 with a NUL byte in its body is recorded and retried on schedule', async () => {
    answer = (response) => response.writeHead(500).end(Buffer.from('error\0page'));
    await attemptOnce((await setUp()).context);
    expect(await recorded()).toMatchObject({
      status: 'pending',
      next_in_s: 60,
      outcome: 'retry',
      status_code: 500,
      response_excerpt: 'error\uFFFDpage',
    });
  });

  it('a 200 with a NUL byte in its body is delivered', async () => {
    answer = (response) => response.writeHead(200).end(Buffer.from('ok\0!'));
    await attemptOnce((await setUp()).context);
    expect(await recorded()).toMatchObject({
      status: 'delivered',
      outcome: 'delivered',
      status_code: 200,
      response_excerpt: 'ok\uFFFD!',
    });
  });

  it('a status above 599 is recorded as invalid_response, with no status, and retried', async () => {
    answer = (response) => response.writeHead(700).end('seven hundred');
    await attemptOnce((await setUp()).context);
    expect(await recorded()).toMatchObject({
      status: 'pending',
      next_in_s: 60,
      outcome: 'retry',
      status_code: null,
      error_class: 'invalid_response',
    });
  });
});

describe('Retry-After and retry.honorRetryAfter', () => {
  it('without the key, a 503 with Retry-After: 3600 follows delaysSeconds and does not hold the webhook', async () => {
    answer = (response) => response.writeHead(503, { 'retry-after': '3600' }).end();
    await attemptOnce((await setUp()).context);
    expect(await recorded()).toMatchObject({ status: 'pending', next_in_s: 60, hold_in_s: null, outcome: 'retry' });
  });

  it('with honorRetryAfter: true, the same answer waits an hour and holds the webhook', async () => {
    answer = (response) => response.writeHead(503, { 'retry-after': '3600' }).end();
    await attemptOnce((await setUp({ honorRetryAfter: true })).context);
    expect(await recorded()).toMatchObject({ status: 'pending', next_in_s: 3600, hold_in_s: 3600, outcome: 'retry' });
  });

  it('a Retry-After past what a Date holds is recorded, with or without the key', async () => {
    answer = (response) => response.writeHead(503, { 'retry-after': '9999999999999' }).end();
    await attemptOnce((await setUp()).context);
    expect(await recorded()).toMatchObject({ status: 'pending', next_in_s: 60, hold_in_s: null, outcome: 'retry' });
    await resetData(db.pool);
    await delivery!.close();
    await attemptOnce((await setUp({ honorRetryAfter: true })).context);
    expect(await recorded()).toMatchObject({ status: 'pending', next_in_s: 3600, hold_in_s: 3600, outcome: 'retry' });
  });

  it('with the key, a Retry-After that is not one valid value is ignored', async () => {
    answer = (response) => {
      response.setHeader('retry-after', ['600', '1200']);
      response.writeHead(503).end();
    };
    await attemptOnce((await setUp({ honorRetryAfter: true })).context);
    expect(await recorded()).toMatchObject({ status: 'pending', next_in_s: 60, hold_in_s: null, outcome: 'retry' });
  });
});
