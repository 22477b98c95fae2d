import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { fillOutbox, clearResults } from './coalesce-bench.js';
import { readLedger, type Ledger } from './ledger.js';
import { startReceiverProcess } from './receiver-process.js';
import { startRunProcess } from './run-process.js';
import { latenciesOverInterval, percentile } from './stats.js';

function writeConfig(receiverUrl: string, intervalSeconds: number): { path: string; cleanup: () => void } {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-bench-'));
  const file = path.join(directory, 'config.yaml');
  writeFileSync(
    file,
    `assetUpdater:
  intervalSeconds: ${intervalSeconds}
  network: { allowPrivateAddresses: true }
  webhooks:
    - { id: all, url: "${receiverUrl}/all", enabled: true, resourceTypes: [Resource, Project], concurrency: 8 }
    - { id: summer, url: "${receiverUrl}/summer", enabled: true, concurrency: 8, filters: [ { filterKind: keywords, condition: ANY, value: [summer] } ] }
    - { id: created, url: "${receiverUrl}/created", enabled: true, eventTypes: [Created, Purged], concurrency: 8 }
`,
  );
  return { path: file, cleanup: () => rmSync(directory, { recursive: true, force: true }) };
}

async function waitUntilDrained(pool: pg.Pool, timeoutMs: number, sample?: () => void): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    sample?.();
    const { rows } = await pool.query<{ waiting: number }>(
      `select (select count(*) from asset_webhooks.outbox)::int
            + (select count(*) from asset_webhooks.payloads where status in ('open', 'pending'))::int as waiting`,
    );
    if ((rows[0]?.waiting ?? 1) === 0) return;
    if (Date.now() > deadline) throw new Error(`not drained within ${timeoutMs / 1000}s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A clean database, a receiver process and a `run` process on it, with one stop for all three. */
async function startRig(
  databaseUrl: string,
  pool: pg.Pool,
  options: { report: boolean; backlog?: { events: number; assets: number }; httpPort?: number },
) {
  await clearResults(pool);
  await pool.query('truncate asset_webhooks.outbox');
  if (options.backlog) await fillOutbox(pool, options.backlog.events, options.backlog.assets);
  const receiver = await startReceiverProcess(options.report);
  const config = writeConfig(receiver.url, 1);
  const run = startRunProcess(databaseUrl, config.path, undefined, options.httpPort);
  return {
    receiver,
    run,
    async stop(): Promise<void> {
      await run.stop();
      await receiver.stop();
      config.cleanup();
    },
  };
}

export interface MemoryBenchResult {
  readonly peakRssMb: number;
  readonly events: number;
  readonly drainSeconds: number;
  readonly ledger: Ledger;
}

/** Peak RSS of the `run` process while it drains a backlog of `events` outbox rows (coalescing and delivery). */
export async function measureMemory(
  databaseUrl: string,
  pool: pg.Pool,
  options: { events: number; assets: number },
): Promise<MemoryBenchResult> {
  const { run, stop } = await startRig(databaseUrl, pool, { report: false, backlog: options });
  const started = Date.now();
  let peak = 0;
  try {
    await waitUntilDrained(pool, 30 * 60_000, () => {
      peak = Math.max(peak, run.peakRssMb());
    });
  } finally {
    peak = Math.max(peak, run.peakRssMb());
    await stop();
  }
  return {
    peakRssMb: peak,
    events: options.events,
    drainSeconds: (Date.now() - started) / 1000,
    ledger: await readLedger(pool),
  };
}

export interface LatencyBenchResult {
  readonly p50OverIntervalMs: number;
  readonly p99OverIntervalMs: number;
  readonly events: number;
  readonly eventsPerSecond: number;
  /** GET /metrics answered 200 meanwhile, per second (0 without scrapes). */
  readonly scrapesPerSecond: number;
  readonly ledger: Ledger;
}

/**
 * Commit-to-receipt time minus the interval, at a steady rate of CREATED events
 * (one INSERT of rate/10 assets every 100 ms) with a one-second interval,
 * measured on the webhook that receives every event (`all`).
 */
export async function measureLatency(
  databaseUrl: string,
  pool: pg.Pool,
  options: { eventsPerSecond: number; seconds: number; scrapesPerSecond?: number },
): Promise<LatencyBenchResult> {
  const httpPort = options.scrapesPerSecond ? await freePort() : undefined;
  const { receiver, stop } = await startRig(databaseUrl, pool, { report: true, httpPort });
  const committedAt = new Map<number, number>();
  let scraping = true;
  let scraped = 0;
  let scrapeStarted = 0;
  let scrapeSeconds = 0;
  const scrapers: Promise<void>[] = [];
  try {
    await new Promise((resolve) => setTimeout(resolve, 3000));
    if (httpPort !== undefined && options.scrapesPerSecond) {
      // Sixteen clients, each paced to its share of the rate: scrapes arrive
      // steadily, and faster ones are not queued behind a slow answer.
      scrapeStarted = Date.now();
      const lanes = 16;
      const periodMs = (1000 * lanes) / options.scrapesPerSecond;
      for (let lane = 0; lane < lanes; lane += 1) {
        scrapers.push(
          (async () => {
            for (let next = Date.now() + (lane * periodMs) / lanes; scraping; next += periodMs) {
              if (next > Date.now()) await new Promise((resolve) => setTimeout(resolve, next - Date.now()));
              const response = await fetch(`http://127.0.0.1:${httpPort}/metrics`).catch(() => null);
              if (response) {
                await response.arrayBuffer();
                if (response.status === 200) scraped += 1;
              }
            }
          })(),
        );
      }
    }
    const perTick = Math.max(1, Math.round(options.eventsPerSecond / 10));
    const started = Date.now();
    for (let tick = 0; Date.now() - started < options.seconds * 1000; tick += 1) {
      const due = started + tick * 100;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      const { rows } = await pool.query<{ asset_id: number }>(
        `insert into assets (supertype, title) select 'Resource', 'latency' from generate_series(1, $1::int) returning asset_id`,
        [perTick],
      );
      const now = Date.now();
      for (const row of rows) committedAt.set(row.asset_id, now);
    }
    await waitUntilDrained(pool, 120_000);
  } finally {
    scraping = false;
    await Promise.all(scrapers);
    if (scrapeStarted > 0) scrapeSeconds = (Date.now() - scrapeStarted) / 1000;
    await stop();
  }
  const latencies = latenciesOverInterval(receiver.received, committedAt, (path) => path.endsWith('/all'), 1000);
  return {
    p50OverIntervalMs: percentile(latencies, 50),
    p99OverIntervalMs: percentile(latencies, 99),
    events: committedAt.size,
    eventsPerSecond: committedAt.size / options.seconds,
    scrapesPerSecond: scrapeSeconds > 0 ? scraped / scrapeSeconds : 0,
    ledger: await readLedger(pool),
  };
}
