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
import { measureDelivery } from './delivery-bench.js';
import { measureIdleWebhooks } from './idle-webhooks-bench.js';
import { measureMirror } from './mirror-bench.js';
import { measureLatency, measureMemory } from './drain-bench.js';
import { measureIsolation, measureSlowReceivers } from './isolation-bench.js';
import { busyLine, cpuLine, parseSections, SECTIONS, summaryOf, tableOf, type Figure, type Section } from './report.js';
import { ensureAssets, measureWriteCost } from './write-cost.js';
import { applicationPool } from './application-pool.js';

// Resolved from the compiled file, dist-bench/bench/src/main.js, to the repository's bench/results/.
const resultsDirectory = fileURLToPath(new URL('../../../bench/results/', import.meta.url));

/**
 * `npm run bench [-- --quick] [--json] [--database-url URL] [--only SECTIONS] [--repeats N] [--keep-database]`: the cost to the
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
    .option('--only <sections>', `measure only these, comma-separated: ${SECTIONS.join(', ')}; writes no results file`)
    .option('--repeats <n>', 'repetitions of every repeated figure (default 3)')
    .option('--keep-database', 'leave the benchmark database on the server of --database-url, for profiling')
    .parse([...argv])
    .opts<{
      quick?: boolean;
      json?: boolean;
      databaseUrl?: string;
      only?: string;
      repeats?: string;
      keepDatabase?: boolean;
    }>();
  const quick = options.quick === true;
  const sections = parseSections(options.only);
  const wanted = (section: Section): boolean => sections.has(section);
  // The embedded server goes when the bench ends, and its databases with it.
  if (options.keepDatabase === true && options.databaseUrl === undefined)
    throw new Error('--keep-database needs --database-url: the embedded server is removed when the bench ends');
  const repeats = options.repeats === undefined ? 3 : Number(options.repeats);
  if (!Number.isInteger(repeats) || repeats < 1) throw new Error(`--repeats takes a whole number of at least 1`);
  const log = (line: string): void => void process.stderr.write(`${line}\n`);
  const sizes = quick
    ? {
        assets: 100_000,
        coalesceEvents: 100_000,
        memoryEvents: 100_000,
        repeats,
        tpsSlices: { pairs: 12, seconds: 2 },
        bulkPairs: 6,
        deliveryPayloads: 3000,
        latencySeconds: 15,
      }
    : {
        assets: 100_000,
        coalesceEvents: 1_000_000,
        memoryEvents: 1_000_000,
        repeats,
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
  const pool = applicationPool(databaseUrl, { max: 12, applicationName: 'asset-webhooks bench' });
  const figures: Figure[] = [];
  const add = (key: string, value: Figure['value'], digits: number, goal: string): void =>
    void figures.push({ key, value, digits, goal });
  const details: Record<string, unknown> = {};
  const out = process.stdout;
  const clearWebhooks = (): Promise<unknown> => pool.query('delete from asset_webhooks.webhooks');
  try {
    await migrate(pool, { binding: 'reference' });
    log(
      `benchmark database ${database} on ${embedded ? 'embedded PostgreSQL' : 'the given server'}; ${quick ? 'quick' : 'full'} sizes; ${[...sections].join(', ')}`,
    );
    if (['write-cost', 'coalesce', 'tenants', 'mirror', 'latency', 'memory'].some((s) => wanted(s as Section)))
      await ensureAssets(pool, sizes.assets);

    if (wanted('write-cost')) {
      log('write cost: single-row UPDATEs and one bulk UPDATE, with and without triggers...');
      const writeCost = (details.writeCost = await measureWriteCost(pool, {
        assets: sizes.assets,
        bulkRows: 100_000,
        connections: 4,
        sliceSeconds: sizes.tpsSlices.seconds,
        singleRowPairs: sizes.tpsSlices.pairs,
        bulkPairs: sizes.bulkPairs,
      }));
      add('write_cost.single_row_tps_ratio', writeCost.singleRowTps.ratio, 3, '>= 0.75 (floor)');
      add('write_cost.bulk_update_time_ratio', writeCost.bulkUpdateSeconds.ratio, 3, '<= 1.8');
    }
    const cpuNotes: string[] = [];
    if (wanted('coalesce')) {
      log(`coalescing ${sizes.coalesceEvents} events across 10 webhooks...`);
      const coalesce10 = (details.coalesce10 = await measureCoalesce(pool, benchWebhooks(10), {
        events: sizes.coalesceEvents,
        assets: sizes.assets,
        repeats: sizes.repeats,
      }));
      log(`coalescing ${sizes.coalesceEvents} events across 100 webhooks...`);
      const coalesce100 = (details.coalesce100 = await measureCoalesce(pool, benchWebhooks(100), {
        events: sizes.coalesceEvents,
        assets: sizes.assets,
        repeats: 1,
      }));
      add('coalesce.events_per_second', coalesce10.eventsPerSecond, 0, 'report');
      add('coalesce.ratio_to_raw_sql', coalesce10.ratioToRawSql, 3, '>= 0.35');
      add('coalesce.events_per_second_100_webhooks', coalesce100.eventsPerSecond, 0, 'report');
      add(
        'coalesce.webhook_scaling_ratio',
        coalesce100.eventsPerSecond.median / coalesce10.eventsPerSecond.median,
        3,
        '>= 0.35',
      );
      // Not goals: where an event's CPU goes, next to the raw statement's (medians, µs).
      const cpu = coalesce10.cpuMicrosPerEvent;
      if (cpu)
        cpuNotes.push(
          `coalescing CPU per event, µs: coalescer ${cpuLine(cpu.coalesce, 1)}${busyLine(coalesce10.busyCpus)}\n${''.padEnd(29)}raw INSERT ... SELECT ${cpuLine(cpu.rawSql, 1)}`,
        );
    }
    if (wanted('tenants')) {
      log('coalescing 50,000 created assets across 1,000 domains with 10 and 1,000 tenant webhooks...');
      const tenants = (details.tenants = await measureTenants(pool, {
        tenants: [10, 1000],
        assets: 50_000,
        domains: 1000,
        repeats: sizes.repeats,
      }));
      add('coalesce.tenant_scaling_ratio', tenants.scalingRatio, 3, '>= 0.5');
      add('coalesce.tenant_storage_ratio', tenants.storageRatio, 3, '<= 1.5');
      add('coalesce.events_per_second_10_tenants', tenants.eventsPerSecond[10]!, 0, 'report');
      add('coalesce.events_per_second_1000_tenants', tenants.eventsPerSecond[1000]!, 0, 'report');
      add('coalesce.bytes_per_event_10_tenants', tenants.bytesPerEvent[10]!, 0, 'report');
      add('coalesce.bytes_per_event_1000_tenants', tenants.bytesPerEvent[1000]!, 0, 'report');
      await clearWebhooks();
    }
    if (wanted('mirror')) {
      log(`coalescing ${sizes.coalesceEvents} events across 10 webhooks, as mirror webhooks and as plain ones...`);
      const mirror = (details.mirror = await measureMirror(pool, benchWebhooks(10), {
        events: sizes.coalesceEvents,
        assets: sizes.assets,
        repeats: sizes.repeats,
      }));
      add('mirror.coalesce_ratio', mirror.coalesceRatio, 3, '>= 0.7');
      add('mirror.bytes_per_member', mirror.bytesPerMember, 0, `report (${mirror.members} members)`);
      add('mirror.events_per_second', mirror.mirrorEventsPerSecond, 0, 'report');
    }
    if (wanted('delivery')) {
      log(`delivering ${sizes.deliveryPayloads} payloads of 100 events...`);
      await clearWebhooks();
      const delivery = (details.delivery = await measureDelivery(databaseUrl, pool, {
        payloads: sizes.deliveryPayloads,
        concurrency: 32,
        repeats: sizes.repeats,
      }));
      add('delivery.ratio_to_durable_baseline', delivery.ratioToDurableBaseline, 3, '>= 0.6');
      add('delivery.payloads_per_second', delivery.payloadsPerSecond, 0, 'report');
      add('delivery.durable_baseline_payloads_per_second', delivery.durableBaselinePayloadsPerSecond, 0, 'report');
      add('delivery.ratio_to_raw_undici', delivery.ratioToRawUndici, 3, 'report');
      add('delivery.ratio_to_fair_baseline', delivery.ratioToFairBaseline, 3, '>= 0.85');
      add('delivery.fair_baseline_payloads_per_second', delivery.fairBaselinePayloadsPerSecond, 0, 'report');
      const cpu = delivery.cpuMicrosPerPayload;
      if (delivery.pgCpuRatioToFairBaseline)
        add('delivery.pg_cpu_ratio_to_fair_baseline', delivery.pgCpuRatioToFairBaseline, 3, '<= 1.5');
      if (cpu) {
        add('delivery.pg_cpu_us_per_payload', cpu.service.postgres, 0, 'report');
        if (cpu.fairBaseline)
          add('delivery.fair_baseline_pg_cpu_us_per_payload', cpu.fairBaseline.postgres, 0, 'report');
        if (cpu.durableBaseline)
          add('delivery.durable_baseline_pg_cpu_us_per_payload', cpu.durableBaseline.postgres, 0, 'report');
      }
      if (cpu) {
        const lines = [
          `delivery CPU per payload, µs: service ${cpuLine(cpu.service, 0)}${busyLine(delivery.busyCpus?.service)}`,
          `${''.padEnd(35)}raw undici ${cpuLine(cpu.rawUndici, 0)}${busyLine(delivery.busyCpus?.rawUndici)}`,
        ];
        if (cpu.durableBaseline)
          lines.push(
            `${''.padEnd(29)}durable baseline ${cpuLine(cpu.durableBaseline, 0)}${busyLine(delivery.busyCpus?.durableBaseline)}`,
          );
        if (cpu.fairBaseline)
          lines.push(
            `${''.padEnd(32)}fair baseline ${cpuLine(cpu.fairBaseline, 0)}${busyLine(delivery.busyCpus?.fairBaseline)}`,
          );
        cpuNotes.push(lines.join('\n'));
      }
    }
    if (wanted('idle-webhooks')) {
      log(`delivering ${sizes.deliveryPayloads} payloads to 10 webhooks, configured alone and among 10,000...`);
      await clearWebhooks();
      const idle = (details.idleWebhooks = await measureIdleWebhooks(databaseUrl, pool, {
        payloads: sizes.deliveryPayloads,
        busy: 10,
        configured: 10_000,
        concurrency: 4,
        repeats: sizes.repeats,
      }));
      add('delivery.idle_webhooks_ratio', idle.ratio, 3, '>= 0.9');
      add('delivery.payloads_per_second_10_webhooks', idle.alonePayloadsPerSecond, 0, 'report');
      add('delivery.payloads_per_second_10_of_10000_webhooks', idle.amongIdlePayloadsPerSecond, 0, 'report');
      const cpu = idle.cpuMicrosPerPayload;
      if (cpu)
        cpuNotes.push(
          `delivery to 10 webhooks, CPU per payload, µs: alone ${cpuLine(cpu.alone, 0)}\n${''.padEnd(38)}among 10,000 ${cpuLine(cpu.amongIdle, 0)}`,
        );
      await clearWebhooks();
    }
    const ledgers: boolean[] = [];
    if (wanted('latency')) {
      await clearWebhooks();
      log(`latency at 1,000 events per second for ${sizes.latencySeconds}s...`);
      const latency = (details.latency = await measureLatency(databaseUrl, pool, {
        eventsPerSecond: 1000,
        seconds: sizes.latencySeconds,
      }));
      await clearWebhooks();
      log(`latency at 1,000 events per second for ${sizes.latencySeconds}s, /metrics scraped 200 times a second...`);
      const underScrapes = (details.latencyUnderScrapes = await measureLatency(databaseUrl, pool, {
        eventsPerSecond: 1000,
        seconds: sizes.latencySeconds,
        scrapesPerSecond: 200,
      }));
      ledgers.push(latency.ledger.balanced, underScrapes.ledger.balanced);
      const scrapes = Math.round(underScrapes.scrapesPerSecond);
      add('latency.p50_over_interval_ms', latency.p50OverIntervalMs, 0, 'report');
      add('latency.p99_over_interval_ms', latency.p99OverIntervalMs, 0, '<= 1,000');
      add(
        'latency.p50_over_interval_ms_under_scrapes',
        underScrapes.p50OverIntervalMs,
        0,
        `report (${scrapes} GET /metrics a second)`,
      );
      add(
        'latency.p99_over_interval_ms_under_scrapes',
        underScrapes.p99OverIntervalMs,
        0,
        'report (against latency.p99_over_interval_ms)',
      );
      add('latency.scrapes_per_second', underScrapes.scrapesPerSecond, 0, 'report');
    }
    if (wanted('isolation')) {
      await clearWebhooks();
      log('isolation: nine healthy webhooks beside one whose receiver never answers...');
      const isolation = (details.isolation = await measureIsolation(databaseUrl, pool, {
        eventsPerSecond: 100,
        seconds: sizes.latencySeconds,
      }));
      add('delivery.isolation_p99_over_interval_ms', isolation.p99OverIntervalMs, 0, '<= 1,000');
    }
    if (wanted('slow-receivers')) {
      await clearWebhooks();
      log('slow receivers: 20 webhooks answering after 100 ms, concurrency 4 each...');
      const slowReceivers = (details.slowReceivers = await measureSlowReceivers(databaseUrl, pool, {
        payloadsPerWebhook: quick ? 200 : 400,
        repeats: sizes.repeats,
      }));
      add('delivery.slow_receivers_ratio_to_bound', slowReceivers.ratioToBound, 3, '>= 0.9');
    }
    if (wanted('memory')) {
      await clearWebhooks();
      log(`memory of the run process draining ${sizes.memoryEvents} events...`);
      const memory = (details.memory = await measureMemory(databaseUrl, pool, {
        events: sizes.memoryEvents,
        assets: sizes.assets,
      }));
      ledgers.push(memory.ledger.balanced);
      add('memory.peak_rss_mb', memory.peakRssMb, 0, '<= 256');
    }
    if (ledgers.length > 0) add('ledger.balanced', ledgers.every(Boolean), 0, 'true');

    const summary = summaryOf(figures);
    out.write(tableOf(figures));
    for (const note of cpuNotes) out.write(`\n${note}\n`);
    // A subset's figures are not a run's record: only a run of every section writes the results file.
    if (options.only === undefined) {
      const file = writeResults(quick, { quick, sizes, summary, ...details });
      out.write(`\nresults written to ${path.relative(process.cwd(), file)}\n`);
    }
    if (options.json) out.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await pool.end();
    if (options.keepDatabase === true) log(`benchmark database ${database} kept`);
    else await admin.query(`drop database if exists ${database} with (force)`).catch(() => {});
    await admin.end();
    await embedded?.stop();
  }
}

/** Writes `bench/results/<date>-<machine>[-quick].json` with the machine and every repetition's figures. */
function writeResults(quick: boolean, results: Record<string, unknown>): string {
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
    ...results,
  };
  mkdirSync(resultsDirectory, { recursive: true });
  const file = path.join(
    resultsDirectory,
    `${new Date().toISOString().slice(0, 10)}-${machine}${quick ? '-quick' : ''}.json`,
  );
  writeFileSync(file, `${JSON.stringify(details, null, 2)}\n`);
  return file;
}
