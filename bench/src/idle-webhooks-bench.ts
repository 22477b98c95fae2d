import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { pino } from 'pino';
import { startService } from '../../src/service/service.js';
import { measuredSplit, postmasterOf, withCpu, type CpuSplit } from './cpu.js';
import { deliverStored } from './deliver-stored.js';
import { samplePayload } from './delivery-bench.js';
import { startReceiverProcess } from './receiver-process.js';
import { measured, pairedRatio, type Measured } from './stats.js';

export interface IdleWebhooksBenchResult {
  /** Delivery's rate to the busy webhooks configured alone. */
  readonly alonePayloadsPerSecond: Measured;
  /** The same with `configured - busy` webhooks beside them that have no payloads. */
  readonly amongIdlePayloadsPerSecond: Measured;
  /** The median of per-round ratios, among idle webhooks over alone. */
  readonly ratio: Measured;
  readonly busy: number;
  readonly configured: number;
  /** Which configuration each round measured first: they alternate, so a drift of the machine favours neither. */
  readonly order: ReadonlyArray<'alone-first' | 'among-idle-first'>;
  /** This process's (the service's) and the server's CPU per payload, µs, by configuration; absent without /proc. */
  readonly cpuMicrosPerPayload?: {
    readonly alone: CpuSplit<'node' | 'postgres'>;
    readonly amongIdle: CpuSplit<'node' | 'postgres'>;
  };
}

/** The ids of the webhooks that get payloads: the same in both configurations. */
const busyIds = (busy: number): string[] => Array.from({ length: busy }, (_, i) => `busy-${i}`);

function configText(url: string, options: { busy: number; configured: number; concurrency: number }): string {
  const lines = busyIds(options.busy).map(
    (id) => `    - { id: ${id}, url: "${url}", enabled: true, concurrency: ${options.concurrency} }`,
  );
  for (let i = options.busy; i < options.configured; i += 1)
    lines.push(`    - { id: idle-${i}, url: "${url}/idle-${i}", enabled: true, concurrency: ${options.concurrency} }`);
  return `assetUpdater:\n  intervalSeconds: 3600\n  network: { allowPrivateAddresses: true }\n  webhooks:\n${lines.join('\n')}\n`;
}

/**
 * Whether a webhook costs delivery what it sends rather than what is
 * configured: `payloads` stored payloads of 100 events spread over `busy`
 * webhooks (concurrency `concurrency` each), delivered by a service whose
 * configuration holds those webhooks alone, and by one whose configuration
 * holds `configured` webhooks of which the others never have a payload. Both
 * post to one receiver process. Each round starts a service per
 * configuration on a webhooks table holding that configuration only, lets it
 * deliver one unmeasured batch (code compiled, connections open, every
 * webhook's row written), then measures one.
 */
export async function measureIdleWebhooks(
  databaseUrl: string,
  pool: pg.Pool,
  options: { payloads: number; busy: number; configured: number; concurrency: number; repeats: number },
): Promise<IdleWebhooksBenchResult> {
  const receiver = await startReceiverProcess(false);
  const { body, eventIds } = samplePayload(100);
  const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-bench-idle-'));
  const ids = busyIds(options.busy);
  const perWebhook = Math.ceil(options.payloads / options.busy);
  const payloads = perWebhook * options.busy;
  const setUp = async (): Promise<void> => {
    await pool.query('delete from asset_webhooks.payloads where webhook_id = any($1::text[])', [ids]);
    // The attempt log has no foreign key: its rows of the payloads deleted go too, as retention deletes them.
    await pool.query('truncate asset_webhooks.attempt_log, asset_webhooks.in_flight');
    await pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
       select w.id, 'pending', $1, octet_length($1), 100, $3::uuid[]
       from generate_series(1, $2::int) g, unnest($4::text[]) w(id) order by g, w.id`,
      [body, perWebhook, eventIds, ids],
    );
  };
  const parties = { postmaster: await postmasterOf(pool) };
  const cpu = { alone: {} as Record<string, number[]>, amongIdle: {} as Record<string, number[]> };
  const deliverWith = async (configured: number): Promise<number> => {
    const configPath = path.join(directory, `config-${configured}.yaml`);
    writeFileSync(configPath, configText(receiver.url, { ...options, configured }));
    // Only the configuration under test has rows: the other's would be disabled rows beside it.
    await pool.query('delete from asset_webhooks.webhooks');
    const service = await startService({ databaseUrl, configPath, logger: pino({ level: 'silent' }) });
    try {
      await setUp();
      await deliverStored(pool, receiver.countUrl, ids, payloads);
      await setUp();
      const samples = configured === options.busy ? cpu.alone : cpu.amongIdle;
      return await withCpu(samples, payloads, parties, () => deliverStored(pool, receiver.countUrl, ids, payloads));
    } finally {
      await service.stop();
    }
  };
  const alone: number[] = [];
  const amongIdle: number[] = [];
  const order: Array<'alone-first' | 'among-idle-first'> = [];
  try {
    for (let repeat = 0; repeat < options.repeats; repeat += 1) {
      const aloneFirst = repeat % 2 === 0;
      order.push(aloneFirst ? 'alone-first' : 'among-idle-first');
      if (aloneFirst) alone.push(await deliverWith(options.busy));
      amongIdle.push(await deliverWith(options.configured));
      if (!aloneFirst) alone.push(await deliverWith(options.busy));
    }
  } finally {
    await pool.query('delete from asset_webhooks.payloads where webhook_id = any($1::text[])', [ids]);
    await receiver.stop();
    rmSync(directory, { recursive: true, force: true });
  }
  return {
    alonePayloadsPerSecond: measured(alone),
    amongIdlePayloadsPerSecond: measured(amongIdle),
    ratio: pairedRatio(amongIdle, alone),
    busy: options.busy,
    configured: options.configured,
    order,
    ...cpuFigures(cpu),
  };
}

function cpuFigures(cpu: {
  alone: Record<string, number[]>;
  amongIdle: Record<string, number[]>;
}): Pick<IdleWebhooksBenchResult, 'cpuMicrosPerPayload'> {
  const alone = measuredSplit(cpu.alone, ['node', 'postgres'] as const);
  const amongIdle = measuredSplit(cpu.amongIdle, ['node', 'postgres'] as const);
  return alone && amongIdle ? { cpuMicrosPerPayload: { alone, amongIdle } } : {};
}
