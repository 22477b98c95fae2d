import pg from 'pg';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { holdSlots, insertPayloads } from '../helpers/delivery.js';
import { rowsReadInTransaction } from '../helpers/rows-read.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// What each `run` process asks of payloads over and over, a claim at every
// result and the expiry sweep every few seconds, must read the rows it
// handles, never a webhook's whole queue or the history, whatever the
// statistics. A claim visits every webhook with a free slot and asks whether
// its queue holds a payload: answered by a scan that stops at the first
// match, that reads every row stored before the webhook's first queued one,
// once per webhook and claim.

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
  await db.pool.query('alter table asset_webhooks.payloads set (autovacuum_enabled = false)');
});

afterEach(async () => {
  await db.pool.query('alter table asset_webhooks.payloads reset (autovacuum_enabled)');
});

async function webhooks(count: number, concurrency: number): Promise<string[]> {
  const ids = Array.from({ length: count }, (_, i) => `w${String(i).padStart(4, '0')}`);
  await db.pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
     select id, 'http://127.0.0.1/', true, $2 from unnest($1::text[]) id`,
    [ids, concurrency],
  );
  return ids;
}

/** Runs one statement in a session of its own: its rows, and the payloads rows it read. */
async function measured<T extends pg.QueryResultRow>(sql: string): Promise<{ rows: T[]; read: number }> {
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  try {
    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    const { rows } = await session.query<T>(sql);
    const read = await rowsReadInTransaction(session);
    await session.query('commit');
    return { rows, read };
  } finally {
    await session.end();
  }
}

/** One claim of up to 16: how many it took, and the payloads rows it read. */
async function claim(): Promise<{ claimed: number; read: number }> {
  const { rows, read } = await measured('select * from asset_webhooks.claim_payloads(16, 16, null, 86400)');
  return { claimed: rows.length, read };
}

it('reads a few rows per payload taken when the statistics know the backlog of two webhooks', async () => {
  const [first, second] = await webhooks(2, 16);
  await insertPayloads(db.pool, first!, 4_000);
  await insertPayloads(db.pool, second!, 4_000);
  await db.pool.query('analyze asset_webhooks.payloads');
  const { claimed, read } = await claim();
  expect(claimed).toBe(16);
  // A scan for the second webhook's first payload reads the first one's 4,000.
  expect(read).toBeLessThan(300);
});

it('reads a few rows per payload taken behind a delivered history, with current statistics', async () => {
  const ids = await webhooks(3, 32);
  for (const id of ids) await insertPayloads(db.pool, id, 3_000);
  // Three in four delivered, spread through the table as a day of deliveries leaves them.
  await db.pool.query(
    "update asset_webhooks.payloads set status = 'delivered', delivered_at = now() where payload_id % 4 <> 0",
  );
  await db.pool.query('analyze asset_webhooks.payloads');
  const { claimed, read } = await claim();
  expect(claimed).toBe(16);
  expect(read).toBeLessThan(300);
});

it('reads about one row per webhook visited when the statistics were taken while the table was empty', async () => {
  const ids = await webhooks(200, 4);
  await db.pool.query('analyze asset_webhooks.payloads');
  for (const id of ids) await insertPayloads(db.pool, id, 20);
  const { claimed, read } = await claim();
  expect(claimed).toBe(16);
  // Each of the 200 webhooks asked once, by key; a scan per webhook reads about 400,000.
  expect(read).toBeLessThan(1_000);
});

it('the expiry sweep reads the payloads past their window, not the waiting queue, with current statistics', async () => {
  const [waiting] = await webhooks(1, 32);
  const expired = await insertPayloads(db.pool, waiting!, 1, new Date(Date.now() - 2 * 86_400_000));
  const queue = await insertPayloads(db.pool, waiting!, 4_000);
  // In flight, and waiting in their slots for a retry.
  await holdSlots(db.pool, queue.slice(0, 32));
  await holdSlots(db.pool, queue.slice(32, 40), { retryAt: "now() + interval '1 minute'" });
  await db.pool.query('analyze asset_webhooks.payloads');
  const { rows, read } = await measured<{ payload_id: string }>(
    'select * from asset_webhooks.expired_payloads(86400, 500)',
  );
  expect(rows.map((row) => Number(row.payload_id))).toEqual(expired);
  // The expired one and the payloads holding slots; a range the scan cannot bound reads the 4,000.
  expect(read).toBeLessThan(200);
});
