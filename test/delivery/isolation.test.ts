import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { receiverConfig, type TestWebhook } from '../helpers/config.js';
import { insertPayloads } from '../helpers/delivery.js';
import { claimsPass } from '../helpers/pump-metrics.js';
import {
  answerAfter,
  eventually,
  startTestReceiver,
  type ReceivedRequest,
  type TestReceiver,
} from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { stringify, parse } from 'yaml';

// Webhooks are independent of each other: a receiver that never answers, a
// backlog of thousands, or a receiver that throttles holds back its own
// webhook only. The service runs in this process against the real database
// and real receivers; bounds are derived from the configured interval.

const INTERVAL_SECONDS = 1;
/** Commit to receipt: the wait for the next interval boundary, plus a second for coalescing and the request. */
const WITHIN_MS = INTERVAL_SECONDS * 1000 + 1000;

const db = useTestDatabase();
let receivers: TestReceiver[] = [];
let running: TestService | undefined;

beforeEach(async () => {
  await resetData(db.pool);
});
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
  await running?.stop();
  running = undefined;
});

async function receiver(): Promise<TestReceiver> {
  const started = await startTestReceiver();
  receivers.push(started);
  return started;
}

function config(
  webhooks: readonly TestWebhook[],
  extra: Record<string, unknown> = {},
  retry?: Record<string, unknown>,
): string {
  const document = parse(receiverConfig(webhooks, { intervalSeconds: INTERVAL_SECONDS, requestTimeoutSeconds: 3 })) as {
    assetUpdater: Record<string, unknown>;
  };
  Object.assign(document.assetUpdater, extra, retry ? { retry } : {});
  return stringify(document);
}

/** The asset ids of a request's events. */
function assetIds(request: ReceivedRequest): number[] {
  return (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events.map((event) => event.assetId);
}

/** When each asset first reached the receiver. */
function receipts(target: TestReceiver): Map<number, number> {
  const at = new Map<number, number>();
  for (const request of target.requests) for (const id of assetIds(request)) if (!at.has(id)) at.set(id, request.at);
  return at;
}

async function commitAsset(assetId: number): Promise<number> {
  await db.pool.query('insert into assets (asset_id) values ($1)', [assetId]);
  return Date.now();
}

describe('a receiver that never answers', () => {
  it(
    'with concurrency 64 and a backlog, holds back neither healthy webhooks nor coalescing, and backs off to one attempt',
    { timeout: 90_000 },
    async () => {
      const stuck = await receiver();
      stuck.respond = () => 'hang';
      const healthy = [await receiver(), await receiver(), await receiver()];
      await db.pool.query(
        "insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency) values ('stuck', 'http://127.0.0.1/', true, 64)",
      );
      await insertPayloads(db.pool, 'stuck', 300);
      const port = await freePort();
      running = await startTestService(
        db.url,
        config([
          { id: 'stuck', url: stuck.url, concurrency: 64 },
          ...healthy.map((target, index) => ({ id: `healthy-${index}`, url: target.url })),
        ]),
        { httpPort: port },
      );
      // Every request the stuck receiver can take is open before the first change.
      await stuck.waitFor(64);

      const committed = new Map<number, number>();
      const firstCommit = Date.now();
      // One change at a time, the next once this one has reached every healthy receiver: the changes
      // spread over as many coalescing intervals while the stuck receiver holds its requests.
      for (let assetId = 1; assetId <= 10; assetId += 1) {
        committed.set(assetId, await commitAsset(assetId));
        for (const target of healthy)
          await eventually(async () => (receipts(target).has(assetId) ? true : undefined), {
            timeoutMs: 20_000,
            what: `asset ${assetId} at each healthy receiver`,
          });
      }
      const lastCommit = Date.now();
      for (const target of healthy) {
        await eventually(async () => (receipts(target).size === 10 ? true : undefined), {
          timeoutMs: 20_000,
          what: 'every asset at each healthy receiver',
        });
      }
      for (const target of healthy) {
        const late = [...receipts(target)]
          .map(([assetId, at]) => at - committed.get(assetId)!)
          .filter((latency) => latency > WITHIN_MS);
        expect(late).toEqual([]);
      }

      // Coalescing kept its schedule: a run started in (nearly) every interval of the window.
      const {
        rows: [runs],
      } = await db.pool.query<{ n: number }>(
        'select count(*)::int as n from asset_webhooks.coalesce_runs where started_at between $1 and $2',
        [new Date(firstCommit), new Date(lastCommit)],
      );
      const intervals = Math.floor((lastCommit - firstCommit) / (INTERVAL_SECONDS * 1000));
      expect(runs!.n).toBeGreaterThanOrEqual(intervals - 1);

      // Its first requests timed out (3 s): from then on one attempt at a time, not 64.
      await eventually(
        async () => {
          const { rows } = await db.pool.query(
            "select 1 from asset_webhooks.webhooks where webhook_id = 'stuck' and failing_since is not null",
          );
          return rows.length > 0 ? true : undefined;
        },
        { timeoutMs: 10_000, what: 'the stuck webhook to back off' },
      );
      const before = stuck.requests.length;
      // Three claims of the pump (one a second at least): a webhook not held to one in flight would take more.
      await claimsPass(port, 3);
      expect(stuck.requests.length - before).toBeLessThanOrEqual(2);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toContain('asset_webhooks_webhook_state{webhook="stuck",state="backing_off"} 1');
      expect(metrics).toContain('asset_webhooks_webhook_state{webhook="healthy-0",state="healthy"} 1');
    },
  );
});

describe('a webhook with a long backlog', () => {
  it(
    'does not delay a webhook with a single payload, even when the backlog could fill every request slot',
    { timeout: 120_000 },
    async () => {
      const big = await receiver();
      const concurrent = answerAfter(big, 20);
      const small = await receiver();
      await db.pool.query(
        "insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency) values ('big', 'http://127.0.0.1/', true, 64)",
      );
      await insertPayloads(db.pool, 'big', 10_000);
      // A process-wide cap below big's concurrency: only taking turns lets small through.
      running = await startTestService(
        db.url,
        config(
          [
            { id: 'big', url: big.url, concurrency: 64 },
            { id: 'small', url: small.url },
          ],
          { maxRequestsInFlight: 16 },
        ),
      );
      await big.waitFor(200, 30_000);
      const committedAt = await commitAsset(1);
      await small.waitFor(1, 20_000);
      expect(small.requests[0]!.at - committedAt).toBeLessThanOrEqual(WITHIN_MS);
      const {
        rows: [backlog],
      } = await db.pool.query<{ n: number }>(
        "select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'big' and status = 'pending'",
      );
      expect(backlog!.n).toBeGreaterThan(1000);
      // The cap holds while settling statements take freed slots again (and big did send several at once).
      expect(concurrent.most()).toBeLessThanOrEqual(16);
      expect(concurrent.most()).toBeGreaterThanOrEqual(4);
    },
  );
});

describe('a receiver that throttles', () => {
  it(
    "a 429 with Retry-After under retryStatusCodes and honorRetryAfter is retried no earlier than Retry-After, and the webhook's other payloads wait too",
    { timeout: 60_000 },
    async () => {
      const throttling = await receiver();
      throttling.respond = (_request, index) => (index === 0 ? { status: 429, headers: { 'retry-after': '3' } } : 200);
      running = await startTestService(
        db.url,
        config(
          [{ id: 'crm', url: throttling.url, concurrency: 4 }],
          {},
          { delaysSeconds: [1, 1], retryStatusCodes: [429], honorRetryAfter: true },
        ),
      );
      await commitAsset(1);
      await throttling.waitFor(1);
      const throttledAt = throttling.requests[0]!.at;
      // Payloads made while the webhook is held back.
      await commitAsset(2);
      // Asset 2's payload is made (by a coalescing run) before asset 3 is committed: two payloads wait.
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from asset_webhooks.payloads');
          return rows[0]!.n >= 2 ? true : undefined;
        },
        { timeoutMs: 10_000, what: "asset 2's payload" },
      );
      await commitAsset(3);
      await throttling.waitFor(4, 20_000);
      // Every later request, the retry and the new payloads alike, came once the 3 s had passed.
      for (const request of throttling.requests.slice(1))
        expect(request.at - throttledAt).toBeGreaterThanOrEqual(3000 - 50);
      const rows = await eventually(
        async () => {
          const { rows: found } = await db.pool.query<{ status: string }>(
            `select p.status, array_agg(a.status_code order by a.attempt_no) as codes
         from asset_webhooks.payloads p join asset_webhooks.attempts a using (payload_id) group by p.payload_id, p.status order by p.payload_id`,
          );
          return found.every((row) => row.status !== 'pending') ? found : undefined;
        },
        { timeoutMs: 10_000, what: 'every payload settled' },
      );
      expect(rows).toEqual([
        { status: 'delivered', codes: [429, 200] },
        { status: 'delivered', codes: [200] },
        { status: 'delivered', codes: [200] },
      ]);
    },
  );

  it('without retryStatusCodes, a 429 is rejected as the specification says', { timeout: 30_000 }, async () => {
    const throttling = await receiver();
    throttling.respond = () => ({ status: 429, headers: { 'retry-after': '3' } });
    running = await startTestService(db.url, config([{ id: 'crm', url: throttling.url }]));
    await commitAsset(1);
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ reason: string }>('select reason from asset_webhooks.dead_letters');
        return rows[0]?.reason;
      },
      { timeoutMs: 10_000, what: 'the payload to be dead-lettered' },
    ).then((reason) => expect(reason).toBe('rejected'));
    expect(throttling.requests).toHaveLength(1);
  });
});
