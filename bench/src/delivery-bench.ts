import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { pino } from 'pino';
import { Agent, request } from 'undici';
import { serializeBody, serializeEvent } from '../../src/payloads/serialize.js';
import { startService } from '../../src/service/service.js';
import { busyCpus, measuredSplit, postmasterOf, withCpu, type CpuSplit } from './cpu.js';
import { createScratchAttempts, durableBaseline, durablePool, synchronousCommitOf } from './durable-baseline.js';
import { deliverStored } from './deliver-stored.js';
import { createFairTables, fairBaseline, storeFairBodies } from './fair-baseline.js';
import { startReceiverProcess } from './receiver-process.js';
import { measured, pairedRatio, ratio, type Measured } from './stats.js';

export interface DeliveryBenchResult {
  readonly payloadsPerSecond: Measured;
  readonly rawUndiciPayloadsPerSecond: Measured;
  readonly ratioToRawUndici: Measured;
  /** The same bodies sent by undici, each answer committed as an attempt row (durable-baseline.ts). */
  readonly durableBaselinePayloadsPerSecond: Measured;
  /** The median of per-round ratios: each round measures the service and the durable baseline back to back. */
  readonly ratioToDurableBaseline: Measured;
  /** The same bodies read from the database in blocks, each request's start and result committed (fair-baseline.ts). */
  readonly fairBaselinePayloadsPerSecond: Measured;
  /** The median of per-round ratios of the service to the fair baseline, measured next to each other in every round. */
  readonly ratioToFairBaseline: Measured;
  /**
   * The PostgreSQL server's CPU per payload of the service over the fair
   * baseline's, the median of per-round ratios; absent where /proc cannot tell.
   */
  readonly pgCpuRatioToFairBaseline?: Measured;
  /**
   * The order of each round: `baseline-first` measures the durable baseline,
   * the fair baseline, then the service; `service-first` the reverse. They
   * alternate, so a drift of the machine does not favour one side, and the
   * fair baseline is always next to the service.
   */
  readonly order: ReadonlyArray<'service-first' | 'baseline-first'>;
  readonly concurrency: number;
  /**
   * Where the CPU went, in microseconds per payload (medians of the measured
   * rounds): this process (the service's Node side, or the raw loop), the
   * PostgreSQL server, and the receiver. Absent without /proc (or with a
   * server on another machine).
   */
  readonly cpuMicrosPerPayload?: {
    readonly service: CpuSplit<DeliveryParty>;
    readonly rawUndici: CpuSplit<DeliveryParty>;
    readonly durableBaseline?: CpuSplit<DeliveryParty>;
    readonly fairBaseline?: CpuSplit<DeliveryParty>;
  };
  /** How many CPUs each side kept busy (Node, the server, the receiver), per round (see busyCpus). */
  readonly busyCpus?: {
    readonly service: Measured;
    readonly rawUndici: Measured;
    readonly durableBaseline?: Measured;
    readonly fairBaseline?: Measured;
  };
}

type DeliveryParty = 'node' | 'postgres' | 'receiver';
const DELIVERY_PARTIES: readonly DeliveryParty[] = ['node', 'postgres', 'receiver'];

type CpuSamples = Record<string, number[]>;

/** A payload of `count` events as coalescing writes it: its body and its events' ids. */
export function samplePayload(count: number): { body: string; eventIds: string[] } {
  const eventIds = Array.from({ length: count }, () => randomUUID());
  const events = eventIds.map((eventId, i) =>
    serializeEvent({
      atomId: String(1000 + i),
      eventId,
      eventTimestamp: new Date().toISOString(),
      assetId: String(i + 1),
      assetUuid: randomUUID(),
      eventType: 'EDITED',
    }),
  );
  return { body: serializeBody(events, new Date().toISOString()), eventIds };
}

/**
 * Delivery throughput: `payloads` stored payloads of 100 events delivered by
 * the service (jobs, attempt records, the pump) to a receiver in another
 * process that answers 200 at once, against three baselines posting the same
 * bodies at the same concurrency to the same receiver: a plain undici loop;
 * the durable baseline, which also commits an attempt row per request in
 * batches; and the fair baseline, which also reads the bodies from the
 * database and records each request's start before it is sent. Every side
 * first runs one unmeasured round (code compiled, connections open); then
 * each round measures all four, the service and the baselines in alternating
 * order (see `order`).
 */
export async function measureDelivery(
  databaseUrl: string,
  pool: pg.Pool,
  options: { payloads: number; concurrency: number; repeats: number },
): Promise<DeliveryBenchResult> {
  // The baselines' own connections, which must commit synchronously (checked before anything starts).
  await createScratchAttempts(pool);
  await createFairTables(pool);
  const writer = durablePool(databaseUrl);
  const claims = durablePool(databaseUrl);
  const endBaselines = (): Promise<unknown> => Promise.all([writer.end(), claims.end()]);
  const synchronousCommit = await Promise.all([synchronousCommitOf(writer), synchronousCommitOf(claims)]).then(
    (settings) => settings.find((setting) => setting !== 'on') ?? 'on',
    async (error: unknown) => {
      await endBaselines();
      throw error;
    },
  );
  if (synchronousCommit !== 'on') {
    await endBaselines();
    throw new Error(
      `delivery bench: the durable baseline's sessions commit with synchronous_commit = ${synchronousCommit}`,
    );
  }
  const receiver = await startReceiverProcess(false);
  const { body, eventIds } = samplePayload(100);
  const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-bench-'));
  const configPath = path.join(directory, 'config.yaml');
  writeFileSync(
    configPath,
    `assetUpdater:
  intervalSeconds: 3600
  network: { allowPrivateAddresses: true }
  webhooks:
    - { id: bench, url: "${receiver.url}", enabled: true, concurrency: ${options.concurrency} }
`,
  );
  const service = await startService({
    databaseUrl,
    configPath,
    logger: pino({ level: 'silent' }),
    concurrency: options.concurrency,
  });
  const serviceRates: number[] = [];
  const rawRates: number[] = [];
  const durableRates: number[] = [];
  const fairRates: number[] = [];
  const order: Array<'service-first' | 'baseline-first'> = [];
  const serviceCpu: CpuSamples = {};
  const rawCpu: CpuSamples = {};
  const durableCpu: CpuSamples = {};
  const fairCpu: CpuSamples = {};
  const baseline = (): Promise<number> =>
    durableBaseline(receiver.url, body, writer, { payloads: options.payloads, concurrency: options.concurrency });
  // The fair baseline's bodies are stored before the span whose CPU is counted, as the service's payloads are.
  const fair = async (samples?: CpuSamples): Promise<number> => {
    await storeFairBodies(pool, body, options.payloads);
    return withCpu(samples, options.payloads, parties, () =>
      fairBaseline(receiver.url, { claims, results: writer }, options),
    );
  };
  const parties = { postmaster: await postmasterOf(pool), others: { receiver: receiver.pid } };
  const setUp = async (payloads: number): Promise<void> => {
    await pool.query("delete from asset_webhooks.payloads where webhook_id = 'bench'");
    // The attempt log has no foreign key: its rows of the payloads deleted go too, as retention deletes them.
    await pool.query('truncate asset_webhooks.attempt_log, asset_webhooks.in_flight');
    // Rows as coalescing writes them, event ids included: they widen every
    // row version delivery writes, and so what each settle costs the database.
    await pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
       select 'bench', 'pending', $1, octet_length($1), 100, $3::uuid[] from generate_series(1, $2::int)`,
      [body, payloads, eventIds],
    );
  };
  const deliver = (payloads: number): Promise<number> => deliverStored(pool, receiver.countUrl, ['bench'], payloads);
  // The CPU of the delivery only, not of setting up its payloads.
  const deliverAll = async (payloads: number, samples?: CpuSamples): Promise<number> => {
    await setUp(payloads);
    return withCpu(samples, payloads, parties, () => deliver(payloads));
  };
  try {
    // One unmeasured round each, so neither side is measured while its code
    // is still being compiled and its connections opened. A full-size round:
    // a short one leaves the raw loop still warming up in its first measured
    // round, which would flatter the first pair's ratio.
    await rawUndici(receiver.url, body, options.payloads, options.concurrency);
    await baseline();
    await fair();
    await deliverAll(options.payloads);
    for (let repeat = 0; repeat < options.repeats; repeat += 1) {
      rawRates.push(
        await withCpu(rawCpu, options.payloads, parties, () =>
          rawUndici(receiver.url, body, options.payloads, options.concurrency),
        ),
      );
      const serviceFirst = repeat % 2 === 1;
      order.push(serviceFirst ? 'service-first' : 'baseline-first');
      if (serviceFirst) {
        serviceRates.push(await deliverAll(options.payloads, serviceCpu));
        fairRates.push(await fair(fairCpu));
        durableRates.push(await withCpu(durableCpu, options.payloads, parties, baseline));
      } else {
        durableRates.push(await withCpu(durableCpu, options.payloads, parties, baseline));
        fairRates.push(await fair(fairCpu));
        serviceRates.push(await deliverAll(options.payloads, serviceCpu));
      }
    }
  } finally {
    await endBaselines();
    await service.stop();
    await receiver.stop();
    rmSync(directory, { recursive: true, force: true });
  }
  return {
    payloadsPerSecond: measured(serviceRates),
    rawUndiciPayloadsPerSecond: measured(rawRates),
    ratioToRawUndici: ratio(serviceRates, rawRates),
    durableBaselinePayloadsPerSecond: measured(durableRates),
    ratioToDurableBaseline: pairedRatio(serviceRates, durableRates),
    fairBaselinePayloadsPerSecond: measured(fairRates),
    ratioToFairBaseline: pairedRatio(serviceRates, fairRates),
    ...(serviceCpu.postgres?.length === fairCpu.postgres?.length && fairCpu.postgres?.length
      ? { pgCpuRatioToFairBaseline: pairedRatio(serviceCpu.postgres!, fairCpu.postgres) }
      : {}),
    order,
    concurrency: options.concurrency,
    ...cpuFigures(
      { split: measuredSplit(serviceCpu, DELIVERY_PARTIES), rates: serviceRates },
      { split: measuredSplit(rawCpu, DELIVERY_PARTIES), rates: rawRates },
      { split: measuredSplit(durableCpu, DELIVERY_PARTIES), rates: durableRates },
      { split: measuredSplit(fairCpu, DELIVERY_PARTIES), rates: fairRates },
    ),
  };
}

/** The CPU splits of both sides and the CPUs each kept busy, where /proc could tell. */
function cpuFigures(
  service: SideCpu,
  rawUndici: SideCpu,
  durable: SideCpu,
  fair: SideCpu,
): Pick<DeliveryBenchResult, 'cpuMicrosPerPayload' | 'busyCpus'> {
  if (!service.split || !rawUndici.split) return {};
  const busy = {
    service: busyCpus(service.split, service.rates),
    rawUndici: busyCpus(rawUndici.split, rawUndici.rates),
    durableBaseline: durable.split && busyCpus(durable.split, durable.rates),
    fairBaseline: fair.split && busyCpus(fair.split, fair.rates),
  };
  return {
    cpuMicrosPerPayload: {
      service: service.split,
      rawUndici: rawUndici.split,
      ...(durable.split ? { durableBaseline: durable.split } : {}),
      ...(fair.split ? { fairBaseline: fair.split } : {}),
    },
    ...(busy.service && busy.rawUndici
      ? {
          busyCpus: {
            service: busy.service,
            rawUndici: busy.rawUndici,
            ...(busy.durableBaseline ? { durableBaseline: busy.durableBaseline } : {}),
            ...(busy.fairBaseline ? { fairBaseline: busy.fairBaseline } : {}),
          },
        }
      : {}),
  };
}

interface SideCpu {
  readonly split: CpuSplit<DeliveryParty> | undefined;
  readonly rates: readonly number[];
}

async function rawUndici(url: string, body: string, payloads: number, concurrency: number): Promise<number> {
  const agent = new Agent({ keepAliveTimeout: 60_000 });
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < payloads) {
        next += 1;
        const response = await request(url, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json' },
          dispatcher: agent,
        });
        await response.body.dump();
      }
    }),
  );
  const rate = payloads / (Number(process.hrtime.bigint() - started) / 1e9);
  await agent.close();
  return rate;
}
