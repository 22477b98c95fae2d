import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { pino } from 'pino';
import { Agent, request } from 'undici';
import { announcePayloadsReady } from '../../src/db/payloads-ready.js';
import { startService } from '../../src/service/service.js';
import { busyCpus, measuredSplit, postmasterOf, withCpu, type CpuSplit } from './cpu.js';
import { startReceiverProcess } from './receiver-process.js';
import { measured, ratio, type Measured } from './stats.js';

export interface DeliveryBenchResult {
  readonly payloadsPerSecond: Measured;
  readonly rawUndiciPayloadsPerSecond: Measured;
  readonly ratioToRawUndici: Measured;
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
  };
  /** How many CPUs each side kept busy (Node, the server, the receiver), per round (see busyCpus). */
  readonly busyCpus?: { readonly service: Measured; readonly rawUndici: Measured };
}

type DeliveryParty = 'node' | 'postgres' | 'receiver';
const DELIVERY_PARTIES: readonly DeliveryParty[] = ['node', 'postgres', 'receiver'];

type CpuSamples = Record<string, number[]>;

/**
 * Stores `perWebhook` payloads of `count` events for each of the webhooks, as
 * coalescing stores them: every payload its own events in
 * asset_webhooks.events (ids derived as a run derives them, from a seq and the
 * capture time, so they sort by time as real ones do), and the payload their
 * ids in order, its webhookTimestamp and the byte size of the body
 * asset_webhooks.payload_body assembles from them when it is sent. Payloads
 * are inserted `perWebhook` rounds of one per webhook, in webhook order.
 * Returns one payload's body, for the raw baseline to send.
 */
export async function insertSamplePayloads(
  pool: pg.Pool,
  webhookIds: readonly string[],
  perWebhook: number,
  count: number,
): Promise<string> {
  const {
    rows: [first],
  } = await pool.query<{ seq: string }>(
    'select coalesce(max(seq), 0)::text as seq from asset_webhooks.events where seq is not null',
  );
  await pool.query(
    `with made as (
       insert into asset_webhooks.payloads (webhook_id, status, webhook_timestamp, byte_size, event_count, event_ids)
       select w.webhook_id, 'open', now(), 0, $4,
              array(select asset_webhooks.event_id_of($1::bigint + k.n * $4 + i, now()) from generate_series(1, $4) i)
       from generate_series(0, $3::int * cardinality($2::text[]) - 1) as k(n)
       join unnest($2::text[]) with ordinality as w(webhook_id, pos) on w.pos = k.n % cardinality($2::text[]) + 1
       order by k.n
       returning payload_id, event_ids
     )
     insert into asset_webhooks.events
       (event_id, seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, coalesced_at, delivered_to, payload_ids)
     select e.event_id, asset_webhooks.event_seq_of(e.event_id), now(), 'EDITED',
            e.i, gen_random_uuid(), 1000 + e.i, now(), '{1}', array[m.payload_id]
     from made m cross join unnest(m.event_ids) with ordinality as e(event_id, i)`,
    [first!.seq, webhookIds, perWebhook, count],
  );
  // Written open, so no pump takes them before all are there, then made due at once.
  await pool.query(
    `update asset_webhooks.payloads p set status = 'pending', byte_size = octet_length(asset_webhooks.payload_body(p))
     where p.webhook_id = any($1::text[]) and p.status = 'open'`,
    [webhookIds],
  );
  const {
    rows: [sample],
  } = await pool.query<{ body: string }>(
    `select asset_webhooks.payload_body(p) as body from asset_webhooks.payloads p
     where p.webhook_id = $1 and p.status = 'pending' limit 1`,
    [webhookIds[0]],
  );
  return sample!.body;
}

/** Deletes the webhooks' payloads and the events they carry. */
export async function deleteSamplePayloads(pool: pg.Pool, webhookIds: readonly string[]): Promise<void> {
  await pool.query(
    `with gone as (delete from asset_webhooks.payloads where webhook_id = any($1::text[]) returning event_ids)
     delete from asset_webhooks.events where event_id in (select unnest(event_ids) from gone)`,
    [webhookIds],
  );
}

/**
 * Delivery throughput: `payloads` stored payloads of 100 events delivered by
 * the service (jobs, attempt records, the pump) to a receiver in another
 * process that answers 200 at once, against a plain undici loop posting the
 * same bodies at the same concurrency. Both sides first run one unmeasured
 * round (code compiled, connections open).
 */
export async function measureDelivery(
  databaseUrl: string,
  pool: pg.Pool,
  options: { payloads: number; concurrency: number; repeats: number },
): Promise<DeliveryBenchResult> {
  const receiver = await startReceiverProcess(false);
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
  const serviceCpu: CpuSamples = {};
  const rawCpu: CpuSamples = {};
  const parties = { postmaster: await postmasterOf(pool), others: { receiver: receiver.pid } };
  // One payload's body, for the raw loop: the same bytes the service sends.
  let body = '';
  const setUp = async (payloads: number): Promise<void> => {
    await deleteSamplePayloads(pool, ['bench']);
    // Rows as coalescing writes them: each payload's events in
    // asset_webhooks.events, which every claim assembles the body from, and
    // the payload's event ids, which widen every row version delivery writes.
    body = await insertSamplePayloads(pool, ['bench'], payloads, 100);
  };
  const deliver = async (payloads: number): Promise<number> => {
    const before = await receiverCount(receiver.countUrl);
    const started = process.hrtime.bigint();
    await announcePayloadsReady(pool);
    // Waits on the receiver's count of POSTs, then on the database for the
    // last results to be recorded. Polling the database all along would charge
    // the service with the polls: the check is a scan of payloads, whose CPU
    // would count as the server's.
    let seen = before;
    let progressAt = performance.now();
    while (seen < before + payloads) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const count = await receiverCount(receiver.countUrl);
      if (count > seen) progressAt = performance.now();
      else if (performance.now() - progressAt > 60_000)
        throw new Error(
          `delivery bench: the receiver got ${count - before} of ${payloads} payloads and nothing for a minute`,
        );
      seen = count;
    }
    for (;;) {
      const { rows } = await pool.query<{ waiting: boolean }>(
        "select exists (select 1 from asset_webhooks.payloads where webhook_id = 'bench' and status in ('open', 'pending')) as waiting",
      );
      if (rows[0]?.waiting === false) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const rate = payloads / (Number(process.hrtime.bigint() - started) / 1e9);
    const { rows } = await pool.query<{ n: number }>(
      "select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'bench' and status = 'delivered'",
    );
    if (rows[0]?.n !== payloads)
      throw new Error(`delivery bench: ${rows[0]?.n ?? 0} of ${payloads} payloads were delivered; the run is void`);
    return rate;
  };
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
    await deliverAll(options.payloads);
    await rawUndici(receiver.url, body, options.payloads, options.concurrency);
    for (let repeat = 0; repeat < options.repeats; repeat += 1) {
      rawRates.push(
        await withCpu(rawCpu, options.payloads, parties, () =>
          rawUndici(receiver.url, body, options.payloads, options.concurrency),
        ),
      );
      serviceRates.push(await deliverAll(options.payloads, serviceCpu));
    }
  } finally {
    await service.stop();
    await receiver.stop();
    rmSync(directory, { recursive: true, force: true });
  }
  return {
    payloadsPerSecond: measured(serviceRates),
    rawUndiciPayloadsPerSecond: measured(rawRates),
    ratioToRawUndici: ratio(serviceRates, rawRates),
    concurrency: options.concurrency,
    ...cpuFigures(
      measuredSplit(serviceCpu, DELIVERY_PARTIES),
      measuredSplit(rawCpu, DELIVERY_PARTIES),
      serviceRates,
      rawRates,
    ),
  };
}

/** The CPU splits of both sides and the CPUs each kept busy, where /proc could tell. */
function cpuFigures(
  service: CpuSplit<DeliveryParty> | undefined,
  rawUndici: CpuSplit<DeliveryParty> | undefined,
  serviceRates: readonly number[],
  rawRates: readonly number[],
): Pick<DeliveryBenchResult, 'cpuMicrosPerPayload' | 'busyCpus'> {
  if (!service || !rawUndici) return {};
  const busy = { service: busyCpus(service, serviceRates), rawUndici: busyCpus(rawUndici, rawRates) };
  return {
    cpuMicrosPerPayload: { service, rawUndici },
    ...(busy.service && busy.rawUndici ? { busyCpus: { service: busy.service, rawUndici: busy.rawUndici } } : {}),
  };
}

async function receiverCount(countUrl: string): Promise<number> {
  const response = await request(countUrl);
  return Number(await response.body.text());
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
