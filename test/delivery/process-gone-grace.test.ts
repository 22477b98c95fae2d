import { expect, it } from 'vitest';
import { processGoneGrace } from '../../src/delivery/recover.js';
import { holdProcessLease } from '../../src/service/process-lease.js';
import { settleLeases } from '../helpers/pump-metrics.js';
import { silentLogger } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

// Crash recovery takes another process for dead only after this process has
// held its own lease for 15 s by the database's clock (after an outage every
// live process has taken its lease back by then);
// test/service/process-lease.test.ts covers what recovery does with the grace.
it('takes no process for dead until its own lease has been held 15 s, then waits out the request timeout plus 5 s', async () => {
  const processId = '00000000-0000-4000-8000-0000000000a1';
  expect(await processGoneGrace(db.pool, processId, 30)).toBeNull();
  const lease = await holdProcessLease(db.url, processId, silentLogger);
  try {
    // Taken by the database's clock (asset_webhooks.now()), just now.
    const {
      rows: [age],
    } = await db.pool.query<{ seconds: number }>(
      `select extract(epoch from asset_webhooks.now() - taken_at)::float8 as seconds
       from asset_webhooks.session_locks where name = $1`,
      [`process:${processId}`],
    );
    expect(age!.seconds).toBeGreaterThanOrEqual(0);
    expect(age!.seconds).toBeLessThan(15);
    expect(await processGoneGrace(db.pool, processId, 30)).toBeNull();
    // 14 s old: not yet.
    await db.pool.query(
      "update asset_webhooks.session_locks set taken_at = asset_webhooks.now() - interval '14 seconds' where name = $1",
      [`process:${processId}`],
    );
    expect(await processGoneGrace(db.pool, processId, 30)).toBeNull();
    expect(await settleLeases(db.pool, processId)).toBe(1);
    expect(await processGoneGrace(db.pool, processId, 30)).toBe(35);
    expect(await processGoneGrace(db.pool, processId, 5)).toBe(10);
    // Another process's settled lease is not this one's.
    expect(await processGoneGrace(db.pool, '00000000-0000-4000-8000-0000000000a2', 30)).toBeNull();
  } finally {
    await lease.release();
  }
  // Released: no lease, no grace.
  expect(await processGoneGrace(db.pool, processId, 30)).toBeNull();
});

it('a lease row whose session is gone is no lease, however old', async () => {
  const processId = '00000000-0000-4000-8000-0000000000a3';
  await db.pool.query(
    `insert into asset_webhooks.session_locks (name, holder_pid, holder_started, taken_at)
     values ($1, 2147483000, now() - interval '1 hour', now() - interval '1 hour')
     on conflict (name) do update set holder_pid = excluded.holder_pid, taken_at = excluded.taken_at`,
    [`process:${processId}`],
  );
  try {
    expect(await processGoneGrace(db.pool, processId, 30)).toBeNull();
  } finally {
    await db.pool.query('delete from asset_webhooks.session_locks where name = $1', [`process:${processId}`]);
  }
});
