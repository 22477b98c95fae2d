import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { createPool } from '../../src/db/connect.js';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../src/embedded/embedded-postgres.js';
import { migrate } from '../../src/migrate/migrate.js';
import { benchWebhooks } from './bench-webhooks.js';
import { chaosMain } from './chaos.js';
import { measureCoalesce, measureTenants } from './coalesce-bench.js';
import type { CpuSplit } from './cpu.js';
import { measureDelivery } from './delivery-bench.js';
import { measureLatency, measureMemory } from './drain-bench.js';
import { measureIsolation, measureSlowReceivers } from './isolation-bench.js';
import type { Measured } from './stats.js';
import { ensureAssets, measureWriteCost } from './write-cost.js';

// Resolved from the compiled file, dist-bench/bench/src/main.js, to the repository's bench/results/.
const resultsDirectory = fileURLToPath(new URL('../../../bench/results/', import.meta.url));

/**
 * `npm run bench [-- --quick] [--json] [--database-url URL]`: the cost to the
 * asset database, coalescing and delivery throughput, latency and memory, each
 * against a baseline measured in the same run. Every figure is a median of
 * repeated runs, with min and max in the results file.
 */
export async function benchMain(argv: readonly string[]): Promise<void> {
  // `--chaos`: recovery after crashes, a run of its own (bench/src/chaos.ts).
  if (argv.includes('--chaos')) return chaosMain(argv);
  const options = new Command('bench')
    .option('--quick', 'smaller sizes; finishes in under five minutes')
    .option('--json', 'print the results as one JSON object on the last line')
    .option('--database-url <url>', 'a server to create the benchmark database on (default: embedded PostgreSQL)')
    .parse([...argv])
    .opts<{ quick?: boolean; json?: boolean; databaseUrl?: string }>();
  const quick = options.quick === true;
  const log = (line: string): void => void process.stderr.write(`${line}\n`);
  const sizes = quick
    ? {
        assets: 100_000,
        coalesceEvents: 100_000,
        memoryEvents: 100_000,
        repeats: 3,
        tpsSlices: { pairs: 12, seconds: 2 },
        bulkPairs: 6,
        deliveryPayloads: 3000,
        latencySeconds: 15,
      }
    : {
        assets: 100_000,
        coalesceEvents: 1_000_000,
        memoryEvents: 1_000_000,
        repeats: 3,
        tpsSlices: { pairs: 12, seconds: 4 },
        bulkPairs: 7,
        deliveryPayloads: 5000,
        latencySeconds: 60,
      };

  let embedded: EmbeddedServer | undefined;
  // Durable settings, as in production: the cost of capture is relative to the cost of a write.
  const serverUrl = options.databaseUrl ?? (embedded = await startEmbeddedPostgres({ durable: true })).url;
  const database = `aw_bench_${Date.now().toString(36)}`;
  const admin = createPool(serverUrl, { max: 1 });
  await admin.query(`create database ${database}`);
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  const databaseUrl = url.toString();
  const pool = createPool(databaseUrl, { max: 12, applicationName: 'asset-webhooks bench' });
  try {
    await migrate(pool, databaseUrl, { binding: 'reference' });
    log(
      `benchmark database ${database} on ${embedded ? 'embedded PostgreSQL' : 'the given server'}; ${quick ? 'quick' : 'full'} sizes`,
    );
    await ensureAssets(pool, sizes.assets);

    log('write cost: single-row UPDATEs and one bulk UPDATE, with and without triggers...');
    const writeCost = await measureWriteCost(pool, {
      assets: sizes.assets,
      bulkRows: 100_000,
      connections: 4,
      sliceSeconds: sizes.tpsSlices.seconds,
      singleRowPairs: sizes.tpsSlices.pairs,
      bulkPairs: sizes.bulkPairs,
    });
    log(`coalescing ${sizes.coalesceEvents} events across 10 webhooks...`);
    const coalesce10 = await measureCoalesce(pool, benchWebhooks(10), {
      events: sizes.coalesceEvents,
      assets: sizes.assets,
      repeats: sizes.repeats,
    });
    log(`coalescing ${sizes.coalesceEvents} events across 100 webhooks...`);
    const coalesce100 = await measureCoalesce(pool, benchWebhooks(100), {
      events: sizes.coalesceEvents,
      assets: sizes.assets,
      repeats: 1,
    });
    log('coalescing 50,000 created assets across 1,000 domains with 10 and 1,000 tenant webhooks...');
    const tenants = await measureTenants(pool, {
      tenants: [10, 1000],
      assets: 50_000,
      domains: 1000,
      repeats: sizes.repeats,
    });
    await pool.query('delete from asset_webhooks.webhooks');
    log(`delivering ${sizes.deliveryPayloads} payloads of 100 events...`);
    const delivery = await measureDelivery(databaseUrl, pool, {
      payloads: sizes.deliveryPayloads,
      concurrency: 32,
      repeats: sizes.repeats,
    });
    await pool.query('delete from asset_webhooks.webhooks');
    log(`latency at 1,000 events per second for ${sizes.latencySeconds}s...`);
    const latency = await measureLatency(databaseUrl, pool, { eventsPerSecond: 1000, seconds: sizes.latencySeconds });
    await pool.query('delete from asset_webhooks.webhooks');
    log(`latency at 1,000 events per second for ${sizes.latencySeconds}s, /metrics scraped 200 times a second...`);
    const latencyUnderScrapes = await measureLatency(databaseUrl, pool, {
      eventsPerSecond: 1000,
      seconds: sizes.latencySeconds,
      scrapesPerSecond: 200,
    });
    await pool.query('delete from asset_webhooks.webhooks');
    log('isolation: nine healthy webhooks beside one whose receiver never answers...');
    const isolation = await measureIsolation(databaseUrl, pool, {
      eventsPerSecond: 100,
      seconds: sizes.latencySeconds,
    });
    await pool.query('delete from asset_webhooks.webhooks');
    log('slow receivers: 20 webhooks answering after 100 ms, concurrency 4 each...');
    const slowReceivers = await measureSlowReceivers(databaseUrl, pool, {
      payloadsPerWebhook: quick ? 200 : 400,
      repeats: sizes.repeats,
    });
    await pool.query('delete from asset_webhooks.webhooks');
    log(`memory of the run process draining ${sizes.memoryEvents} events...`);
    const memory = await measureMemory(databaseUrl, pool, { events: sizes.memoryEvents, assets: sizes.assets });

    const summary = {
      write_cost: {
        single_row_tps_ratio: round(writeCost.singleRowTps.ratio.median, 3),
        bulk_update_time_ratio: round(writeCost.bulkUpdateSeconds.ratio.median, 3),
      },
      coalesce: {
        events_per_second: Math.round(coalesce10.eventsPerSecond.median),
        ratio_to_raw_sql: round(coalesce10.ratioToRawSql.median, 3),
        events_per_second_100_webhooks: Math.round(coalesce100.eventsPerSecond.median),
        webhook_scaling_ratio: round(coalesce100.eventsPerSecond.median / coalesce10.eventsPerSecond.median, 3),
        tenant_scaling_ratio: round(tenants.scalingRatio.median, 3),
        tenant_storage_ratio: round(tenants.storageRatio.median, 3),
        events_per_second_10_tenants: Math.round(tenants.eventsPerSecond[10]!.median),
        events_per_second_1000_tenants: Math.round(tenants.eventsPerSecond[1000]!.median),
        bytes_per_event_10_tenants: Math.round(tenants.bytesPerEvent[10]!.median),
        bytes_per_event_1000_tenants: Math.round(tenants.bytesPerEvent[1000]!.median),
      },
      delivery: {
        payloads_per_second: Math.round(delivery.payloadsPerSecond.median),
        ratio_to_raw_undici: round(delivery.ratioToRawUndici.median, 3),
        isolation_p99_over_interval_ms: Math.round(isolation.p99OverIntervalMs),
        slow_receivers_ratio_to_bound: round(slowReceivers.ratioToBound.median, 3),
      },
      latency: {
        p50_over_interval_ms: Math.round(latency.p50OverIntervalMs),
        p99_over_interval_ms: Math.round(latency.p99OverIntervalMs),
        p50_over_interval_ms_under_scrapes: Math.round(latencyUnderScrapes.p50OverIntervalMs),
        p99_over_interval_ms_under_scrapes: Math.round(latencyUnderScrapes.p99OverIntervalMs),
        scrapes_per_second: Math.round(latencyUnderScrapes.scrapesPerSecond),
      },
      memory: { peak_rss_mb: Math.round(memory.peakRssMb) },
      ledger: {
        balanced: latency.ledger.balanced && latencyUnderScrapes.ledger.balanced && memory.ledger.balanced,
      },
    };
    const machine = `${os.hostname()}-${os.cpus().length}cpu`;
    const details = {
      date: new Date().toISOString(),
      machine: {
        hostname: os.hostname(),
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model,
        memoryGb: Math.round(os.totalmem() / 2 ** 30),
        node: process.version,
      },
      quick,
      sizes,
      summary,
      writeCost,
      coalesce10,
      coalesce100,
      tenants,
      delivery,
      latency,
      latencyUnderScrapes,
      isolation,
      slowReceivers,
      memory,
    };
    mkdirSync(resultsDirectory, { recursive: true });
    const file = path.join(
      resultsDirectory,
      `${new Date().toISOString().slice(0, 10)}-${machine}${quick ? '-quick' : ''}.json`,
    );
    writeFileSync(file, `${JSON.stringify(details, null, 2)}\n`);

    const rows: Array<[string, string, string]> = [
      ['write_cost.single_row_tps_ratio', fmt(writeCost.singleRowTps.ratio), '>= 0.75 (floor)'],
      ['write_cost.bulk_update_time_ratio', fmt(writeCost.bulkUpdateSeconds.ratio), '<= 1.8'],
      ['coalesce.events_per_second', fmt(coalesce10.eventsPerSecond, 0), 'report'],
      ['coalesce.ratio_to_raw_sql', fmt(coalesce10.ratioToRawSql), '>= 0.35'],
      ['coalesce.events_per_second_100_webhooks', fmt(coalesce100.eventsPerSecond, 0), 'report'],
      ['coalesce.webhook_scaling_ratio', String(summary.coalesce.webhook_scaling_ratio), '>= 0.35'],
      ['coalesce.events_per_second_10_tenants', fmt(tenants.eventsPerSecond[10]!, 0), 'report'],
      ['coalesce.events_per_second_1000_tenants', fmt(tenants.eventsPerSecond[1000]!, 0), 'report'],
      ['coalesce.tenant_scaling_ratio', fmt(tenants.scalingRatio), '>= 0.5'],
      ['coalesce.bytes_per_event_10_tenants', fmt(tenants.bytesPerEvent[10]!, 0), 'report'],
      ['coalesce.bytes_per_event_1000_tenants', fmt(tenants.bytesPerEvent[1000]!, 0), 'report'],
      ['coalesce.tenant_storage_ratio', fmt(tenants.storageRatio), '<= 1.5'],
      ['delivery.payloads_per_second', fmt(delivery.payloadsPerSecond, 0), '>= 2,000'],
      ['delivery.ratio_to_raw_undici', fmt(delivery.ratioToRawUndici), 'report'],
      ['delivery.isolation_p99_over_interval_ms', String(summary.delivery.isolation_p99_over_interval_ms), '<= 1,000'],
      ['delivery.slow_receivers_ratio_to_bound', fmt(slowReceivers.ratioToBound), '>= 0.9'],
      ['latency.p50_over_interval_ms', String(summary.latency.p50_over_interval_ms), 'report'],
      ['latency.p99_over_interval_ms', String(summary.latency.p99_over_interval_ms), '<= 1,000'],
      [
        'latency.p50_over_interval_ms_under_scrapes',
        String(summary.latency.p50_over_interval_ms_under_scrapes),
        `report (${summary.latency.scrapes_per_second} GET /metrics a second)`,
      ],
      [
        'latency.p99_over_interval_ms_under_scrapes',
        String(summary.latency.p99_over_interval_ms_under_scrapes),
        'report (against latency.p99_over_interval_ms)',
      ],
      ['memory.peak_rss_mb', String(summary.memory.peak_rss_mb), '<= 256'],
      ['ledger.balanced', String(summary.ledger.balanced), 'true'],
    ];
    const out = process.stdout;
    out.write(`\n${'figure'.padEnd(42)}${'median [min, max]'.padEnd(34)}goal\n`);
    for (const [name, value, goal] of rows) out.write(`${name.padEnd(42)}${value.padEnd(34)}${goal}\n`);
    // Not goals: where an event's CPU goes in coalescing (10 webhooks) and a delivered payload's,
    // next to their baselines' (medians, µs).
    const coalesceCpu = coalesce10.cpuMicrosPerEvent;
    if (coalesceCpu) {
      out.write(
        `\ncoalescing CPU per event, µs: coalescer ${cpuLine(coalesceCpu.coalesce, 1)}${busyLine(coalesce10.busyCpus)}\n`,
      );
      out.write(`${''.padEnd(29)}raw INSERT ... SELECT ${cpuLine(coalesceCpu.rawSql, 1)}\n`);
    }
    const deliveryCpu = delivery.cpuMicrosPerPayload;
    if (deliveryCpu) {
      out.write(
        `\ndelivery CPU per payload, µs: service ${cpuLine(deliveryCpu.service, 0)}${busyLine(delivery.busyCpus?.service)}\n`,
      );
      out.write(
        `${''.padEnd(35)}raw undici ${cpuLine(deliveryCpu.rawUndici, 0)}${busyLine(delivery.busyCpus?.rawUndici)}\n`,
      );
    }
    out.write(`\nresults written to ${path.relative(process.cwd(), file)}\n`);
    if (options.json) out.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await pool.end();
    await admin.query(`drop database if exists ${database} with (force)`).catch(() => {});
    await admin.end();
    await embedded?.stop();
  }
}

const PARTY_NAMES: Readonly<Record<string, string>> = { node: 'Node', postgres: 'PostgreSQL', receiver: 'receiver' };

function cpuLine(split: CpuSplit<string>, digits: number): string {
  return Object.entries(split)
    .map(([party, value]) => `${PARTY_NAMES[party] ?? party} ${fmt(value, digits)}`)
    .join(', ');
}

/** `; CPUs busy 1.6 [1.5, 1.7] of 2`: whether the rate beside it is bound by the machine's CPUs or by waiting. */
function busyLine(busy: Measured | undefined): string {
  return busy ? `; CPUs busy ${fmt(busy, 2)} of ${os.availableParallelism()}` : '';
}

function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

function fmt(m: { median: number; min: number; max: number }, digits = 3): string {
  const f = (v: number): string =>
    v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return `${f(m.median)} [${f(m.min)}, ${f(m.max)}]`;
}
