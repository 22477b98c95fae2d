import type pg from 'pg';
import { pino } from 'pino';
import { coalesce } from '../../src/coalesce/run.js';
import type { RoutedWebhook } from '../../src/coalesce/route.js';
import { busyCpus, measuredSplit, postmasterOf, withCpu, type CpuSplit } from './cpu.js';
import { measured, ratio, type Measured } from './stats.js';

export interface CoalesceBenchResult {
  readonly eventsPerSecond: Measured;
  readonly rawSqlEventsPerSecond: Measured;
  readonly ratioToRawSql: Measured;
  /**
   * Where the CPU went, in microseconds per event (medians of the runs): this
   * process (the coalescer's Node side; next to nothing for the raw statement)
   * and the PostgreSQL server. Absent without /proc (or with a server on another machine).
   */
  readonly cpuMicrosPerEvent?: { readonly coalesce: CpuSplit<'node' | 'postgres'>; readonly rawSql: CpuSplit<'node' | 'postgres'> };
  /** How many CPUs coalescing kept busy (this process and the server), per run (see busyCpus). */
  readonly busyCpus?: Measured;
}

/**
 * Coalescing throughput: `events` outbox rows (a mix of event types over
 * existing assets) turned into persisted payloads, against the baseline of
 * moving the same rows from the outbox into asset_webhooks.events with one
 * INSERT ... SELECT. Both start from the same freshly generated rows.
 */
export async function measureCoalesce(pool: pg.Pool, webhooks: readonly RoutedWebhook[], options: { events: number; assets: number; repeats: number }): Promise<CoalesceBenchResult> {
  await registerBenchWebhooks(pool, webhooks);
  const measuredRates: number[] = [];
  const rawRates: number[] = [];
  const coalesceCpu: Record<string, number[]> = {};
  const rawCpu: Record<string, number[]> = {};
  const parties = { postmaster: await postmasterOf(pool) };
  for (let repeat = 0; repeat < options.repeats; repeat += 1) {
    await fillOutbox(pool, options.events, options.assets);
    let started = process.hrtime.bigint();
    await withCpu(rawCpu, options.events, parties, () => pool.query(
      `with consumed as (delete from asset_webhooks.outbox returning *)
       insert into asset_webhooks.events (event_id, seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, run_id, coalesced_at, routes)
       select coalesce(event_id, asset_webhooks.event_id_of(seq, occurred_at)), seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, 0, now(), '{}'::jsonb
       from consumed`));
    rawRates.push(options.events / seconds(started));
    await clearResults(pool);

    await fillOutbox(pool, options.events, options.assets);
    started = process.hrtime.bigint();
    const result = await withCpu(coalesceCpu, options.events, parties,
      () => coalesce({ pool, webhooks, maxPayloadBytes: 16 * 1024 * 1024, logger: pino({ level: 'silent' }) }));
    measuredRates.push(result.events / seconds(started));
    await clearResults(pool);
  }
  const coalesceSplit = measuredSplit(coalesceCpu, ['node', 'postgres']);
  const rawSplit = measuredSplit(rawCpu, ['node', 'postgres']);
  const busy = coalesceSplit && busyCpus(coalesceSplit, measuredRates);
  return {
    eventsPerSecond: measured(measuredRates), rawSqlEventsPerSecond: measured(rawRates), ratioToRawSql: ratio(measuredRates, rawRates),
    ...(coalesceSplit && rawSplit ? { cpuMicrosPerEvent: { coalesce: coalesceSplit, rawSql: rawSplit } } : {}),
    ...(busy ? { busyCpus: busy } : {}),
  };
}

function seconds(started: bigint): number {
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** Registers the webhooks as the service does; no worker runs, so the jobs the pump adds wait (and are cleared). */
async function registerBenchWebhooks(pool: pg.Pool, webhooks: readonly RoutedWebhook[]): Promise<void> {
  await pool.query('delete from asset_webhooks.webhooks');
  await pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled) select id, 'http://127.0.0.1/bench', true from unnest($1::text[]) id`,
    [webhooks.map((w) => w.id)]);
}

/** Generates outbox rows the way the triggers would: 60% EDITED, 15% CREATED, 10% REVERSION, 10% DELETED, 5% PURGED. */
export async function fillOutbox(pool: pg.Pool, events: number, assets: number): Promise<void> {
  await pool.query(
    `insert into asset_webhooks.outbox (event_type, asset_id, asset_uuid, atom_id, supertype, parent_id)
     select case when r < 60 then 'EDITED' when r < 75 then 'CREATED' when r < 85 then 'REVERSION' when r < 95 then 'DELETED' else 'PURGED' end,
            a.asset_id, a.asset_uuid, a.latest_atom_id, a.supertype, a.parent_id
     from (select g, (g * 37) % 100 as r, 1 + (g * 7919) % $2::bigint as id from generate_series(1, $1::bigint) g) s
     join assets a on a.asset_id = s.id
     order by s.g`,
    [events, assets]);
}

export async function clearResults(pool: pg.Pool): Promise<void> {
  await pool.query('truncate asset_webhooks.events, asset_webhooks.payloads cascade');
  await pool.query("delete from graphile_worker._private_jobs");
  await pool.query('vacuum analyze asset_webhooks.outbox, asset_webhooks.events, asset_webhooks.payloads');
}
