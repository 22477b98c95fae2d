import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { runCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig, type TestConfigOptions, type TestWebhook } from '../helpers/config.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { eventually, startTestReceiver, type ReceivedRequest, type TestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * rateLimit through three real `run` processes on one database: the rate is
 * the webhook's, shared by every process, and a webhook held by its rate
 * holds no other. A rate is requests per second of real time, so these tests
 * wait real time, as little as gives a stable count: the token bucket is
 * refilled by the database's clock, which runs at the real pace here.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();

let receivers: TestReceiver[] = [];
const runs: CliProcess[] = [];

beforeEach(async () => {
  await resetData(db.pool);
});
afterEach(async () => {
  for (const run of runs.splice(0)) expect(await stopRun(run)).toBe(0);
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

async function receiver(): Promise<TestReceiver> {
  const started = await startTestReceiver();
  receivers.push(started);
  return started;
}

/** Starts `count` run processes of one configuration; returns the probe port of the first. */
async function startServices(count: number, webhooks: TestWebhook[], options: TestConfigOptions = {}): Promise<number> {
  const file = path.join(tempDirectory('aw-rate-'), 'config.yaml');
  writeFileSync(file, receiverConfig(webhooks, { requestTimeoutSeconds: 5, ...options }));
  const httpPort = await freePort();
  const started = Array.from({ length: count }, (_, i) =>
    startRun({ databaseUrl: db.url, configFile: file, httpPort: i === 0 ? httpPort : undefined }),
  );
  runs.push(...started);
  await Promise.all(started.map(untilRunning));
  return httpPort;
}

/** The value of one series of GET /metrics, once the metric shows it (the database values are read once a second). */
async function metric(port: number, series: string): Promise<number> {
  return eventually(
    async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    },
    { what: series },
  );
}

/** `count` new assets, in one statement: each is one CREATED event for every webhook. */
async function createAssets(count: number): Promise<void> {
  await db.pool.query('insert into assets select from generate_series(1, $1::int)', [count]);
}

/** Requests that arrived in [from, from + ms). */
function arrivals(requests: readonly ReceivedRequest[], from: number, ms: number): number {
  return requests.filter((request) => request.at >= from && request.at < from + ms).length;
}

/**
 * Waits until `target` has a request that arrived at or after `at`: requests
 * are recorded in the order they arrive, so every one before `at` is in.
 */
async function arrivalsUntil(target: TestReceiver, at: number): Promise<void> {
  await eventually(async () => ((target.requests.at(-1)?.at ?? 0) >= at ? true : undefined), {
    timeoutMs: Math.max(0, at - Date.now()) + 20_000,
    what: `a request arriving after ${new Date(at).toISOString()}`,
  });
}

it(
  'three run processes hold a perSecond: 20 webhook within 10% over 30 s, while an unlimited webhook beside it drains its backlog',
  { timeout: 120_000 },
  async () => {
    const [limited, free] = [await receiver(), await receiver()];
    const port = await startServices(3, [
      { id: 'limited', url: limited.url, batchSize: 1, concurrency: 8, rateLimit: { perSecond: 20, burst: 5 } },
      { id: 'free', url: free.url, batchSize: 1, concurrency: 8 },
    ]);
    // More than the limited webhook can send in the window: it is held by its rate throughout.
    const backlog = 1000;
    await createAssets(backlog);
    // The window starts after the first burst, at an arrival: the bucket is
    // empty and refills at the rate from then on.
    await limited.waitFor(15, 30_000);
    const windowMs = 30_000;
    const from = limited.requests[14]!.at;
    await arrivalsUntil(limited, from + windowMs);
    const sent = arrivals(limited.requests, from, windowMs);
    expect(sent).toBeGreaterThanOrEqual(540);
    expect(sent).toBeLessThanOrEqual(660);
    // The unlimited webhook was not held: its whole backlog arrived within
    // the time in which the limited one, at its rate, sent at most 70 % of the same backlog.
    expect(free.requests.length).toBe(backlog);
    expect(arrivals(limited.requests, 0, from + windowMs)).toBeLessThanOrEqual(backlog * 0.7);
    // The metrics: the rate in force, and the time held by it (most of the window); none for the unlimited one.
    expect(await metric(port, 'asset_webhooks_webhook_rate_per_second{webhook="limited"}')).toBe(20);
    expect(await metric(port, 'asset_webhooks_rate_limited_wait_seconds_total{webhook="limited"}')).toBeGreaterThan(15);
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(text).not.toContain('webhook_rate_per_second{webhook="free"}');
    // trace says why a waiting payload of the limited webhook waits (asked until a claim has just held it).
    const {
      rows: [last],
    } = await db.pool.query<{ event_id: string }>(
      `select p.event_ids[1]::text as event_id from asset_webhooks.payloads p
       where p.webhook_id = 'limited' and p.status = 'pending'
         and not exists (select 1 from asset_webhooks.in_flight f where f.payload_id = p.payload_id)
       order by p.payload_id desc limit 1`,
    );
    const traced = await eventually(
      async () => {
        const result = await runCli(['trace', last!.event_id, '--database-url', db.url]);
        return result.stdout.includes("held by its webhook's rate limit since") ? result.stdout : undefined;
      },
      { timeoutMs: 10_000, what: "trace to say the limited webhook's payload waits for its rate" },
    );
    expect(traced).toContain('(20 requests a second in force; rateLimit)');
  },
);

it(
  'an adaptive webhook facing a receiver that answers 429 above 10/s settles near 10/s: 6 to 10.5 accepted and at most 13 sent a second over 10 s',
  { timeout: 120_000 },
  async () => {
    const limited = await receiver();
    // Accepts at most 10 requests in any second: a sliding window over the accepted ones.
    const accepted: number[] = [];
    limited.respond = (request) => {
      if (accepted.filter((at) => at > request.at - 1000).length >= 10) return 429;
      accepted.push(request.at);
      return 200;
    };
    const port = await startServices(
      2,
      [
        {
          id: 'adaptive',
          url: limited.url,
          batchSize: 1,
          concurrency: 4,
          rateLimit: { perSecond: 40, burst: 4, adaptive: true },
        },
      ],
      { retry: { delaysSeconds: Array.from({ length: 10 }, () => 1), retryStatusCodes: [429] } },
    );
    await createAssets(400);
    // Settling: from 40/s down to the receiver's rate takes a few halvings.
    await limited.waitFor(1, 30_000);
    const from = limited.requests[0]!.at + 5000;
    const windowMs = 10_000;
    await arrivalsUntil(limited, from + windowMs);
    const sent = arrivals(limited.requests, from, windowMs);
    const ok = accepted.filter((at) => at >= from && at < from + windowMs).length;
    // Halving and regaining step by step, the rate in force runs a sawtooth
    // between about half the receiver's rate and a little above it: about
    // three quarters of it accepted on average (7 to 8 a second in practice),
    // against 40 a second sent without adapting.
    expect(ok).toBeGreaterThanOrEqual(60);
    expect(ok).toBeLessThanOrEqual(105);
    expect(sent).toBeLessThanOrEqual(130);
    const { rows } = await db.pool.query<{ rate_current: number }>(
      "select rate_current from asset_webhooks.webhook_queues where webhook_id = 'adaptive'",
    );
    expect(rows[0]!.rate_current).toBeLessThanOrEqual(16);
    expect(await metric(port, 'asset_webhooks_webhook_rate_per_second{webhook="adaptive"}')).toBeLessThanOrEqual(16);
  },
);
