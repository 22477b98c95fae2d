import { parseCrontab } from 'graphile-worker';
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { tick, tickPeriodMs } from '../../src/coalesce/schedule.js';
import { MAINTENANCE_CRONTAB } from '../../src/service/crontab.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

describe('scheduling coalescing runs', () => {
  it('leaves graphile-worker cron only maintenance, with its job key', () => {
    const items = parseCrontab(MAINTENANCE_CRONTAB);
    expect(items.map((item) => [item.task, item.options.jobKey])).toEqual([
      ['maintenance', 'asset_webhooks_maintenance'],
    ]);
  });

  it('checks for a new interval four times per interval, between 100 ms and a second apart', () => {
    expect([0.1, 1, 2, 60, 3600].map(tickPeriodMs)).toEqual([100, 250, 500, 1000, 1000]);
  });

  it('does not tick an interval that began before notBefore, and ticks the next one', async () => {
    await resetData(db.pool);
    await db.pool.query('truncate asset_webhooks.ticks');
    const {
      rows: [clock],
    } = await db.pool.query<{ now: number }>('select extract(epoch from now())::float8 * 1000 as now');
    const slotStart = Math.floor(clock!.now / 3_600_000) * 3_600_000;
    // A process that started (or reloaded to 3600 s) one second into this hour waits for the next.
    expect(await tick(db.pool, 3600, slotStart + 1000)).toBe(false);
    // One that started at the hour's first millisecond, or earlier, ticks it.
    expect(await tick(db.pool, 3600, slotStart)).toBe(true);
    const { rows } = await db.pool.query<{ slot: string }>('select slot::text from asset_webhooks.ticks');
    expect(rows).toEqual([{ slot: String(slotStart / 3_600_000) }]);
  });

  it('adds exactly one job per interval however many processes tick at the same moment', async () => {
    await resetData(db.pool);
    await db.pool.query('truncate asset_webhooks.ticks');
    // Ten pools stand for ten `run` processes.
    const pools = Array.from({ length: 10 }, () => createPool(db.url, { max: 1 }));
    try {
      const results = await Promise.all(pools.map((pool) => tick(pool, 3600)));
      expect(results.filter(Boolean)).toHaveLength(1);
      const again = await Promise.all(pools.map((pool) => tick(pool, 3600)));
      expect(again.filter(Boolean)).toHaveLength(0);
      const { rows } = await db.pool.query(
        "select count(*)::int as n from graphile_worker.jobs where task_identifier = 'coalesce'",
      );
      expect(rows).toEqual([{ n: 1 }]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });
});
