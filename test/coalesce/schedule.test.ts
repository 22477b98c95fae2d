import { parseCrontab } from 'graphile-worker';
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { crontabFor, needsTicker, tick } from '../../src/coalesce/schedule.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

describe('scheduling coalescing runs', () => {
  it('uses graphile-worker cron for whole minutes that divide an hour, the SQL tick otherwise', () => {
    expect(crontabFor(60)).toContain('* * * * * coalesce');
    expect(crontabFor(300)).toContain('*/5 * * * * coalesce');
    expect(needsTicker(60)).toBe(false);
    expect(needsTicker(1)).toBe(true);
    expect(needsTicker(90)).toBe(true);
  });

  it('writes crontabs graphile-worker accepts, with one coalesce job key', () => {
    for (const interval of [1, 60, 300, 3600]) {
      const items = parseCrontab(crontabFor(interval));
      expect(items.map((item) => item.task).sort()).toEqual(interval % 60 === 0 ? ['coalesce', 'maintenance'] : ['maintenance']);
      for (const item of items) expect(item.options.jobKey).toBe(`asset_webhooks_${item.task}`);
    }
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
      const { rows } = await db.pool.query("select count(*)::int as n from graphile_worker.jobs where task_identifier = 'coalesce'");
      expect(rows).toEqual([{ n: 1 }]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });
});
