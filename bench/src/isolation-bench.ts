import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { announcePayloadsReady } from '../../src/db/payloads-ready.js';
import { clearResults } from './coalesce-bench.js';
import { samplePayload } from './delivery-bench.js';
import { startReceiverProcess } from './receiver-process.js';
import { startRunProcess } from './run-process.js';
import { latenciesOverInterval, measured, percentile, type Measured } from './stats.js';

/**
 * A receiver in this process (the service runs in a child process) that
 * answers each POST after `delayMs`, or never when `delayMs` is null, and
 * counts them. Its sockets are destroyed on close, so a request it holds ends.
 */
async function startLocalReceiver(
  delayMs: number | null,
): Promise<{ url: string; count(): number; close(): Promise<void> }> {
  let posts = 0;
  const sockets = new Set<Socket>();
  const held: ServerResponse[] = [];
  const server: Server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      posts += 1;
      if (delayMs === null) held.push(response);
      else setTimeout(() => response.writeHead(200, { 'content-type': 'text/plain' }).end('ok'), delayMs);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    count: () => posts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

function writeConfig(lines: string): { path: string; cleanup: () => void } {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-bench-'));
  const file = path.join(directory, 'config.yaml');
  writeFileSync(file, lines);
  return { path: file, cleanup: () => rmSync(directory, { recursive: true, force: true }) };
}

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`isolation bench: ${what} did not happen within ${timeoutMs / 1000}s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export interface IsolationBenchResult {
  /** Commit-to-receipt minus the interval at the nine healthy webhooks, p50 and p99. */
  readonly p50OverIntervalMs: number;
  readonly p99OverIntervalMs: number;
  readonly events: number;
  /** Requests the receiver that never answers had taken by the end. */
  readonly stuckRequests: number;
}

/**
 * Isolation: nine healthy webhooks beside one whose receiver never answers
 * (concurrency 64, a backlog of 200 payloads, requestTimeoutSeconds 10), with
 * a one-second interval and CREATED events at `eventsPerSecond`; the
 * commit-to-receipt time of the healthy webhooks' events minus the interval.
 */
export async function measureIsolation(
  databaseUrl: string,
  pool: pg.Pool,
  options: { eventsPerSecond: number; seconds: number },
): Promise<IsolationBenchResult> {
  await clearResults(pool);
  await pool.query('truncate asset_webhooks.outbox');
  const healthy = await startReceiverProcess(true);
  const stuck = await startLocalReceiver(null);
  const config = writeConfig(`assetUpdater:
  intervalSeconds: 1
  requestTimeoutSeconds: 10
  network: { allowPrivateAddresses: true }
  webhooks:
    - { id: stuck, url: "${stuck.url}/stuck", enabled: true, concurrency: 64, resourceTypes: [Resource, Project] }
${Array.from({ length: 9 }, (_, i) => `    - { id: healthy-${i}, url: "${new URL(healthy.url).origin}/h${i}", enabled: true, resourceTypes: [Resource, Project] }`).join('\n')}
`);
  const { body, eventIds } = samplePayload(100);
  await pool.query(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
     select 'stuck', 'pending', $1, octet_length($1), 100, $2::uuid[] from generate_series(1, 200)`,
    [body, eventIds],
  );
  const run = startRunProcess(databaseUrl, config.path);
  const committedAt = new Map<number, number>();
  try {
    await waitFor(() => stuck.count() >= 64, 60_000, 'the stuck receiver to hold 64 requests');
    const perTick = Math.max(1, Math.round(options.eventsPerSecond / 10));
    const started = Date.now();
    for (let tick = 0; Date.now() - started < options.seconds * 1000; tick += 1) {
      const due = started + tick * 100;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      const { rows } = await pool.query<{ asset_id: number }>(
        `insert into assets (supertype, title) select 'Resource', 'isolation' from generate_series(1, $1::int) returning asset_id`,
        [perTick],
      );
      const now = Date.now();
      for (const row of rows) committedAt.set(row.asset_id, now);
    }
    const expected = committedAt.size * 9;
    const received = (): number =>
      healthy.received.filter((r) => r.path.startsWith('/h')).reduce((n, r) => n + r.assetIds.length, 0);
    await waitFor(() => received() >= expected, 120_000, 'every event at the healthy receivers');
  } finally {
    await stuck.close();
    await run.stop();
    await healthy.stop();
    config.cleanup();
  }
  const latencies = latenciesOverInterval(healthy.received, committedAt, (path) => path.startsWith('/h'), 1000);
  return {
    p50OverIntervalMs: percentile(latencies, 50),
    p99OverIntervalMs: percentile(latencies, 99),
    events: committedAt.size,
    stuckRequests: stuck.count(),
  };
}

export interface SlowReceiversBenchResult {
  readonly payloadsPerSecond: Measured;
  /** payloadsPerSecond ÷ the rate the receivers allow (webhooks × concurrency ÷ answer time). */
  readonly ratioToBound: Measured;
  /** Per run. */
  readonly payloads: number;
}

/**
 * Slow receivers: 20 webhooks whose receivers answer after 100 ms, concurrency
 * 4 each, a backlog of stored payloads of 100 events; delivered payloads per
 * second against the 800 per second the receivers allow. Each of `repeats`
 * runs starts a `run` process of its own, as an operator would.
 */
export async function measureSlowReceivers(
  databaseUrl: string,
  pool: pg.Pool,
  options: { payloadsPerWebhook: number; repeats: number },
): Promise<SlowReceiversBenchResult> {
  const rates: number[] = [];
  let bound = 0;
  for (let run = 0; run < options.repeats; run += 1) {
    // The wait for the new process's webhooks must not be met by the previous process's rows.
    await pool.query('delete from asset_webhooks.webhooks');
    const once = await measureSlowReceiversOnce(databaseUrl, pool, options.payloadsPerWebhook);
    rates.push(once.payloadsPerSecond);
    bound = once.bound;
  }
  const payloadsPerSecond = measured(rates);
  return {
    payloadsPerSecond,
    ratioToBound: measured(rates.map((rate) => rate / bound)),
    payloads: 20 * options.payloadsPerWebhook,
  };
}

async function measureSlowReceiversOnce(
  databaseUrl: string,
  pool: pg.Pool,
  payloadsPerWebhook: number,
): Promise<{ payloadsPerSecond: number; bound: number }> {
  const webhooks = 20;
  const concurrency = 4;
  const answerMs = 100;
  const bound = (webhooks * concurrency * 1000) / answerMs;
  await clearResults(pool);
  await pool.query('truncate asset_webhooks.outbox');
  const receiver = await startLocalReceiver(answerMs);
  const config = writeConfig(`assetUpdater:
  intervalSeconds: 3600
  network: { allowPrivateAddresses: true }
  webhooks:
${Array.from({ length: webhooks }, (_, i) => `    - { id: slow-${i}, url: "${receiver.url}/s${i}", enabled: true, concurrency: ${concurrency} }`).join('\n')}
`);
  const run = startRunProcess(databaseUrl, config.path);
  const total = webhooks * payloadsPerWebhook;
  let seconds: number;
  try {
    await waitFor(
      async () => {
        const { rows } = await pool.query<{ n: number }>(
          "select count(*)::int as n from asset_webhooks.webhooks where webhook_id like 'slow-%' and enabled",
        );
        return rows[0]!.n === webhooks;
      },
      60_000,
      'the service to record its webhooks',
    );
    const { body, eventIds } = samplePayload(100);
    await pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
       select 'slow-' || w, 'pending', $1, octet_length($1), 100, $2::uuid[]
       from generate_series(1, $3::int) n, generate_series(0, $4::int - 1) w order by n, w`,
      [body, eventIds, payloadsPerWebhook, webhooks],
    );
    const started = performance.now();
    await announcePayloadsReady(pool);
    await waitFor(() => receiver.count() >= total, 600_000, 'every payload at the slow receivers');
    seconds = (performance.now() - started) / 1000;
  } finally {
    await run.stop();
    await receiver.close();
    config.cleanup();
  }
  return { payloadsPerSecond: total / seconds, bound };
}
