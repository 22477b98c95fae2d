import type pg from 'pg';
import { pino } from 'pino';
import { coalesce } from '../../src/coalesce/run.js';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';
import { ROUTING_FEATURES } from '../../src/service/routing-features.js';
import { busyCpus, measuredSplit, postmasterOf, withCpu, type CpuSplit } from './cpu.js';
import { measured, pairedRatio, ratio, type Measured } from './stats.js';

export interface CoalesceBenchResult {
  readonly eventsPerSecond: Measured;
  readonly rawSqlEventsPerSecond: Measured;
  readonly ratioToRawSql: Measured;
  /**
   * Where the CPU went, in microseconds per event (medians of the runs): this
   * process (the coalescer's Node side; next to nothing for the raw statement)
   * and the PostgreSQL server. Absent without /proc (or with a server on another machine).
   */
  readonly cpuMicrosPerEvent?: {
    readonly coalesce: CpuSplit<'node' | 'postgres'>;
    readonly rawSql: CpuSplit<'node' | 'postgres'>;
  };
  /** How many CPUs coalescing kept busy (this process and the server), per run (see busyCpus). */
  readonly busyCpus?: Measured;
}

/**
 * Coalescing throughput: `events` outbox rows (a mix of event types over
 * existing assets) turned into persisted payloads, against the baseline of
 * moving the same rows from the outbox into asset_webhooks.events with one
 * INSERT ... SELECT. Both start from the same freshly generated rows.
 */
export async function measureCoalesce(
  pool: pg.Pool,
  webhooks: readonly RoutedWebhook[],
  options: { events: number; assets: number; repeats: number },
): Promise<CoalesceBenchResult> {
  await registerBenchWebhooks(pool, webhooks);
  const measuredRates: number[] = [];
  const rawRates: number[] = [];
  const coalesceCpu: Record<string, number[]> = {};
  const rawCpu: Record<string, number[]> = {};
  const parties = { postmaster: await postmasterOf(pool) };
  for (let repeat = 0; repeat < options.repeats; repeat += 1) {
    await fillOutbox(pool, options.events, options.assets);
    let started = process.hrtime.bigint();
    await withCpu(rawCpu, options.events, parties, () =>
      pool.query(
        `with consumed as (delete from asset_webhooks.outbox returning *)
       insert into asset_webhooks.events (event_id, seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, run_id, coalesced_at)
       select coalesce(event_id, asset_webhooks.event_id_of(seq, occurred_at)), seq, occurred_at, event_type, asset_id, asset_uuid, atom_id, 0, now()
       from consumed`,
      ),
    );
    rawRates.push(options.events / seconds(started));
    await clearResults(pool);

    await fillOutbox(pool, options.events, options.assets);
    started = process.hrtime.bigint();
    const result = await withCpu(coalesceCpu, options.events, parties, () =>
      coalesce({
        pool,
        webhooks,
        maxPayloadBytes: 16 * 1024 * 1024,
        logger: pino({ level: 'silent' }),
        features: ROUTING_FEATURES,
      }),
    );
    measuredRates.push(result.events / seconds(started));
    await clearResults(pool);
  }
  const coalesceSplit = measuredSplit(coalesceCpu, ['node', 'postgres']);
  const rawSplit = measuredSplit(rawCpu, ['node', 'postgres']);
  const busy = coalesceSplit && busyCpus(coalesceSplit, measuredRates);
  return {
    eventsPerSecond: measured(measuredRates),
    rawSqlEventsPerSecond: measured(rawRates),
    ratioToRawSql: ratio(measuredRates, rawRates),
    ...(coalesceSplit && rawSplit ? { cpuMicrosPerEvent: { coalesce: coalesceSplit, rawSql: rawSplit } } : {}),
    ...(busy ? { busyCpus: busy } : {}),
  };
}

function seconds(started: bigint): number {
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** Registers the webhooks as the service does; no worker runs, so the jobs the pump adds wait (and are cleared). */
export async function registerBenchWebhooks(pool: pg.Pool, webhooks: readonly RoutedWebhook[]): Promise<void> {
  await pool.query('delete from asset_webhooks.webhooks');
  await pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled) select id, 'http://127.0.0.1/bench', true from unnest($1::text[]) id`,
    [webhooks.map((w) => w.id)],
  );
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
    [events, assets],
  );
}

export async function clearResults(pool: pg.Pool): Promise<void> {
  await pool.query(
    'truncate asset_webhooks.events, asset_webhooks.payloads, asset_webhooks.in_flight, asset_webhooks.attempt_log cascade',
  );
  await pool.query('delete from graphile_worker._private_jobs');
  await pool.query('vacuum analyze asset_webhooks.outbox, asset_webhooks.events, asset_webhooks.payloads');
}

export interface TenantBenchResult {
  /** Coalescing rate, events per second, by number of tenant webhooks. */
  readonly eventsPerSecond: Readonly<Record<number, Measured>>;
  /** Bytes of the tables coalescing writes, per event, by number of tenant webhooks. */
  readonly bytesPerEvent: Readonly<Record<number, Measured>>;
  /** The rate with the most webhooks ÷ with the fewest, per pair of runs measured back to back. */
  readonly scalingRatio: Measured;
  /** Bytes per event with the most webhooks ÷ with the fewest. */
  readonly storageRatio: Measured;
}

/**
 * A multi-tenant configuration: `assets` assets created (captured by the
 * binding's triggers) across `domains` domains, and each of `tenants` webhooks
 * `domainId ANY [its own domains]` (tenant i of n owns the domains d with
 * d % n = i), so every event goes to exactly one webhook whatever n. Each
 * repeat measures every tenant count back to back, in alternating order.
 */
export async function measureTenants(
  pool: pg.Pool,
  options: { tenants: readonly number[]; assets: number; domains: number; repeats: number },
): Promise<TenantBenchResult> {
  const rates: Record<number, number[]> = {};
  const bytes: Record<number, number[]> = {};
  for (const n of options.tenants) {
    rates[n] = [];
    bytes[n] = [];
  }
  const firstId = await ensureTenantAssets(pool, options.assets, options.domains);
  for (let repeat = 0; repeat < options.repeats; repeat += 1) {
    const order = repeat % 2 === 0 ? options.tenants : [...options.tenants].reverse();
    for (const n of order) {
      const webhooks = tenantWebhooks(n, options.domains);
      await registerBenchWebhooks(pool, webhooks);
      await pool.query('truncate asset_webhooks.routings, asset_webhooks.coalesce_runs cascade');
      await clearResults(pool);
      // Their creation, as the capture trigger records it.
      await pool.query(
        `insert into asset_webhooks.outbox (event_type, asset_id, asset_uuid, atom_id, supertype, parent_id)
         select 'CREATED', a.asset_id, a.asset_uuid, a.latest_atom_id, a.supertype, a.parent_id
         from assets a where a.asset_id >= $1 order by a.asset_id`,
        [firstId],
      );
      await pool.query('vacuum analyze asset_webhooks.outbox');
      const started = process.hrtime.bigint();
      const result = await coalesce({
        pool,
        webhooks,
        maxPayloadBytes: 16 * 1024 * 1024,
        logger: pino({ level: 'silent' }),
        features: ROUTING_FEATURES,
      });
      rates[n]!.push(result.events / seconds(started));
      const {
        rows: [size],
      } = await pool.query<{ bytes: string }>(
        `select sum(pg_total_relation_size(c.oid))::bigint as bytes from pg_class c
         where c.relnamespace = 'asset_webhooks'::regnamespace and c.relkind = 'r' and c.relname <> 'outbox'`,
      );
      bytes[n]!.push(Number(size!.bytes) / result.events);
    }
  }
  await clearResults(pool);
  await pool.query('delete from asset_webhooks.webhooks');
  const few = Math.min(...options.tenants);
  const many = Math.max(...options.tenants);
  const eventsPerSecond: Record<number, Measured> = {};
  const bytesPerEvent: Record<number, Measured> = {};
  for (const n of options.tenants) {
    eventsPerSecond[n] = measured(rates[n]!);
    bytesPerEvent[n] = measured(bytes[n]!);
  }
  return {
    eventsPerSecond,
    bytesPerEvent,
    scalingRatio: pairedRatio(rates[many]!, rates[few]!),
    storageRatio: pairedRatio(bytes[many]!, bytes[few]!),
  };
}

/**
 * The tenants' assets, created once and kept (deleting them one by one costs
 * a scan of assets per row for the parent_id reference): the `count` assets
 * after the others (ids from the identity, as other benchmarks' inserts take
 * them), spread over the domains. Returns the first one's id.
 */
async function ensureTenantAssets(pool: pg.Pool, count: number, domains: number): Promise<number> {
  const {
    rows: [tenants],
  } = await pool.query<{ first: number | null }>(
    "select min(asset_id)::int as first from assets where title like 'tenant asset %'",
  );
  if (tenants!.first !== null) return tenants!.first;
  const {
    rows: [created],
  } = await pool.query<{ first: number }>(
    `with created as (
       insert into assets (supertype, domain_id, title)
       select 'Resource', g % $2::int, 'tenant asset ' || g from generate_series(1, $1::int) g
       returning asset_id
     )
     select min(asset_id)::int as first from created`,
    [count, domains],
  );
  await pool.query('delete from asset_webhooks.outbox');
  return created!.first;
}

/** `n` webhooks, tenant i `domainId ANY` the domains d < `domains` with d % n = i. */
export function tenantWebhooks(n: number, domains: number): RoutedWebhook[] {
  return Array.from({ length: n }, (_, i): RoutedWebhook => ({
    id: `tenant-${i}`,
    enabled: true,
    batchSize: 100,
    resourceTypes: ['Resource'],
    eventTypes: ['CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'],
    filters: [
      {
        filterKind: 'domainId',
        condition: 'ANY',
        value: Array.from({ length: Math.ceil((domains - i) / n) }, (_, k) => String(i + k * n)),
      },
    ],
  }));
}
