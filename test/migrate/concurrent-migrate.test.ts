import { expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { migrate } from '../../src/migrate/migrate.js';
import { useProbeRole } from '../helpers/probe-role.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { loadMigrations } from '../../src/migrate/sql-files.js';

// migrate serialises itself with a lock that only the service's roles can
// take (a row of asset_webhooks.session_locks, whose table it creates first).

const db = useTestDatabase({ empty: true });
const probe = useProbeRole(db);

it('installs once from two migrates started together on an empty database, whatever advisory locks another role holds', async () => {
  const holder = await probe.pool.connect();
  const pools = [createPool(db.url, { max: 2 }), createPool(db.url, { max: 2 })];
  try {
    // The key migrate used to serialise itself with.
    await holder.query('select pg_advisory_lock(7200531001)');
    const results = await Promise.all(pools.map((pool) => migrate(pool, { binding: 'reference' })));
    // One applies every migration, the other none.
    expect(results.map((result) => result.applied.length).sort()).toEqual([0, loadMigrations().length]);
    const { rows } = await db.pool.query('select count(*)::int as held from asset_webhooks.session_locks');
    expect(rows).toEqual([{ held: 0 }]);
  } finally {
    await holder.query('select pg_advisory_unlock_all()');
    holder.release();
    await Promise.all(pools.map((pool) => pool.end()));
  }
});
