import type pg from 'pg';
import { measured, pairedRatio, type Measured } from './stats.js';

export interface WriteCostResult {
  readonly singleRowTps: {
    readonly withTriggers: Measured;
    readonly withoutTriggers: Measured;
    readonly ratio: Measured;
  };
  readonly bulkUpdateSeconds: {
    readonly withTriggers: Measured;
    readonly withoutTriggers: Measured;
    readonly ratio: Measured;
  };
}

export interface WriteCostOptions {
  readonly assets: number;
  readonly bulkRows: number;
  readonly connections: number;
  /** Length of each side of a single-row pair. */
  readonly sliceSeconds: number;
  readonly singleRowPairs: number;
  readonly bulkPairs: number;
}

/**
 * What capture costs the asset database, in one database and one run:
 * single-row UPDATEs per second from several connections, and the time of one
 * UPDATE of `bulkRows` assets, each with the reference binding's triggers and
 * without (ALTER TABLE ... DISABLE TRIGGER USER), in pairs measured back to
 * back, the order alternating. Each ratio is the median of the pairs' ratios.
 *
 * The single-row sides are short slices run one after the other, after one
 * checkpoint and a warm-up, so that neither side pays for whole pages written
 * to the WAL after a checkpoint: a side that starts right after one pays for
 * those pages, a cost of the write itself that dilutes what capture adds and
 * makes the side without triggers vary within a run. The bulk sides still start
 * after a vacuum and a checkpoint each, so both write every page's image, as
 * a bulk update of a table larger than what changes between checkpoints does.
 */
export async function measureWriteCost(pool: pg.Pool, options: WriteCostOptions): Promise<WriteCostResult> {
  await ensureAssets(pool, Math.max(options.assets, options.bulkRows));
  const tps = { with: [] as number[], without: [] as number[] };
  const bulk = { with: [] as number[], without: [] as number[] };
  // After a checkpoint the first change of each page writes the whole page to
  // the WAL: the warm-up pays for those, so that no slice does.
  await setTriggers(pool, false);
  await startEven(pool);
  const updates = { next: 0 };
  await singleRowTps(pool, options.assets, options.connections, WARM_UP_SECONDS, updates);
  for (let pair = 0; pair < options.singleRowPairs; pair += 1) {
    for (const mode of sides(pair)) {
      await setTriggers(pool, mode === 'with');
      tps[mode].push(await singleRowTps(pool, options.assets, options.connections, options.sliceSeconds, updates));
    }
  }
  for (let pair = 0; pair < options.bulkPairs; pair += 1) {
    for (const mode of sides(pair)) {
      await setTriggers(pool, mode === 'with');
      await startEven(pool);
      bulk[mode].push(await bulkUpdateSeconds(pool, options.bulkRows));
    }
  }
  // The next phase starts from the same state.
  await startEven(pool);
  await setTriggers(pool, true);
  return {
    singleRowTps: {
      withTriggers: measured(tps.with),
      withoutTriggers: measured(tps.without),
      ratio: pairedRatio(tps.with, tps.without),
    },
    bulkUpdateSeconds: {
      withTriggers: measured(bulk.with),
      withoutTriggers: measured(bulk.without),
      ratio: pairedRatio(bulk.with, bulk.without),
    },
  };
}

const WARM_UP_SECONDS = 3;

/** The order of a pair's sides: alternating, so that drift of the machine favours neither. */
function sides(pair: number): Array<'with' | 'without'> {
  return pair % 2 === 0 ? ['with', 'without'] : ['without', 'with'];
}

export async function ensureAssets(pool: pg.Pool, count: number): Promise<void> {
  const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from assets');
  const have = rows[0]?.n ?? 0;
  if (have >= count) return;
  await setTriggers(pool, false);
  await pool.query(
    `insert into assets (supertype, parent_id, state, schema_id, type_id, domain_id, title, latest_atom_id)
     select case when g % 10 = 0 then 'Project' else 'Resource' end, null,
            (array['draft', 'review', 'approved'])[1 + g % 3], g % 5, g % 7, g % 3, 'asset ' || g, g
     from generate_series($1::int + 1, $2::int) g`,
    [have, count],
  );
  await pool.query(
    `insert into asset_keywords (asset_id, value)
     select asset_id, (array['summer', 'winter', 'product', 'campaign'])[1 + asset_id % 4] from assets where asset_id > $1
     on conflict do nothing`,
    [have],
  );
  await pool.query(
    `insert into asset_additional_fields (asset_id, name, value)
     select asset_id, 'campaign', (2020 + asset_id % 8)::text from assets where asset_id > $1
     on conflict do nothing`,
    [have],
  );
  await setTriggers(pool, true);
  await pool.query('vacuum analyze assets, asset_keywords, asset_additional_fields');
}

/**
 * Every measured side starts from the same state: an empty outbox, the assets
 * vacuumed, and a checkpoint just taken. After a checkpoint the first change
 * of each page writes the whole page to the WAL; without one, a side that a
 * checkpoint happened to fall into would pay for them and the other would
 * not, and the ratio would measure the checkpoint rather than capture. A role
 * that may not checkpoint (--database-url) measures without it.
 */
async function startEven(pool: pg.Pool): Promise<void> {
  await pool.query('truncate asset_webhooks.outbox');
  await pool.query('vacuum analyze assets');
  await pool.query('checkpoint').catch(() => undefined);
}

async function setTriggers(pool: pg.Pool, enabled: boolean): Promise<void> {
  if (!enabled) {
    await pool.query('alter table assets disable trigger user');
    return;
  }
  // Back as the binding leaves them: firing in every session (ENABLE TRIGGER USER would fire on origin only).
  await pool.query(`do $$
    declare t record;
    begin
      for t in select tgname from pg_trigger where tgrelid = 'public.assets'::regclass and not tgisinternal loop
        execute format('alter table public.assets enable always trigger %I', t.tgname);
      end loop;
    end $$`);
}

/**
 * Single-row UPDATEs per second for `seconds`. `updates` carries on the
 * sequence of assets from the previous slice, so slices do not update the same
 * assets in the same order.
 */
async function singleRowTps(
  pool: pg.Pool,
  assets: number,
  connections: number,
  seconds: number,
  updates: { next: number },
): Promise<number> {
  const deadline = Date.now() + seconds * 1000;
  const counts = await Promise.all(
    Array.from({ length: connections }, async () => {
      const client = await pool.connect();
      let done = 0;
      try {
        while (Date.now() < deadline) {
          const n = updates.next;
          updates.next += 1;
          const id = 1 + ((n * 7919) % assets);
          await client.query('update assets set title = $2 where asset_id = $1', [id, `t${n}`]);
          done += 1;
        }
      } finally {
        client.release();
      }
      return done;
    }),
  );
  return counts.reduce((a, b) => a + b, 0) / seconds;
}

async function bulkUpdateSeconds(pool: pg.Pool, rows: number): Promise<number> {
  const started = process.hrtime.bigint();
  await pool.query(
    "update assets set state = case when state = 'draft' then 'review' else 'draft' end where asset_id <= $1",
    [rows],
  );
  return Number(process.hrtime.bigint() - started) / 1e9;
}
