import pg from 'pg';
import { beforeEach, expect, it } from 'vitest';
import { claimPayloads, completeAttempts, type ClaimRequest } from '../../src/delivery/attempt-store.js';
import { insertPayloads } from '../helpers/delivery.js';
import { settleOf } from './ledger-fixtures.js';
import { resetData } from '../helpers/seed.js';
import { heapRowsReadInTransaction, rowsReadInTransaction } from '../helpers/rows-read.js';
import { useTestDatabase } from '../helpers/test-database.js';

// claim_payloads and complete_attempts keep their plans for the life of a session, like any
// function's. A `run` process's connections live for days, so plans made
// while the payloads table was empty must not read the history it grows.
// Rows read are counted from the server's table statistics of the
// transaction.

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
  await db.pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
     values ('shop', 'http://127.0.0.1/', true, 4), ('crm', 'http://127.0.0.1/', true, 1)`,
  );
});

it('claims and settles from a session whose plans were made while payloads was empty, reading only the rows it handles', async () => {
  await db.pool.query('analyze asset_webhooks.payloads');
  await db.pool.query('alter table asset_webhooks.payloads set (autovacuum_enabled = false)');
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  try {
    // More calls than PostgreSQL makes custom plans for before it keeps a generic one.
    const claim = (): ClaimRequest => ({ now: new Date(), max: 8, share: 8, after: null, expireAfterSeconds: 86_400 });
    // Each settle names a payload that does not exist, so that every statement an attempt's result
    // runs is planned while the table is empty.
    for (let i = 0; i < 12; i += 1) {
      await session.query('select * from asset_webhooks.claim_payloads(8, 8, null, 86400)');
      const settled = await completeAttempts(session, [settleOf({ payloadId: -1 - i, series: 1, attemptNo: 1 })]);
      expect(settled).toEqual([{ applied: false }]);
      expect(await claimPayloads(session, claim())).toEqual([]);
    }
    // A history of delivered payloads, and a backlog of each webhook, with no statistics taken since.
    const history = await insertPayloads(db.pool, 'shop', 60_000);
    await db.pool.query("update asset_webhooks.payloads set status = 'delivered' where payload_id = any($1)", [
      history,
    ]);
    await insertPayloads(db.pool, 'shop', 3_000);
    await insertPayloads(db.pool, 'crm', 3_000);

    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    const { rows: claimed } = await session.query<{
      payload_id: number;
      webhook_id: string;
      series: number;
      attempt: number;
    }>('select * from asset_webhooks.claim_payloads(8, 8, null, 86400)');
    const claimRead = await heapRowsReadInTransaction(session);
    await session.query('commit');
    expect(claimed.map((row) => row.webhook_id).sort()).toEqual(['crm', 'shop', 'shop', 'shop', 'shop']);
    // The five payloads taken and the look-ups around them, where a scan reads 66,000.
    expect(claimRead).toBeLessThan(200);

    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    const settled = await completeAttempts(
      session,
      claimed.map((row) => settleOf({ payloadId: row.payload_id, series: row.series, attemptNo: row.attempt })),
    );
    const next = await claimPayloads(session, claim());
    const settleRead = await heapRowsReadInTransaction(session);
    await session.query('commit');
    expect(settled.every((answer) => answer.applied)).toBe(true);
    expect(next).toHaveLength(5);
    expect(settleRead).toBeLessThan(400);
  } finally {
    await session.end();
    await db.pool.query('alter table asset_webhooks.payloads reset (autovacuum_enabled)');
  }
});

it('claims from a queue whose statistics were taken while it was empty, reading only the payloads it takes', async () => {
  await db.pool.query('analyze asset_webhooks.payloads');
  await db.pool.query('alter table asset_webhooks.payloads set (autovacuum_enabled = false)');
  await db.pool.query("update asset_webhooks.webhooks set concurrency = 16 where webhook_id = 'shop'");
  // A backlog the statistics do not know of: with them, the planner may
  // think a scan of the whole queue cheaper than a look-up per payload.
  await insertPayloads(db.pool, 'shop', 4_000);
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  try {
    // The counts read in a transaction are those not yet flushed: flush them first.
    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    const { rows: claimed } = await session.query<{ payload_id: number; series: number; attempt: number }>(
      'select * from asset_webhooks.claim_payloads(16, 16, null, 86400)',
    );
    const claimRead = await rowsReadInTransaction(session);
    await session.query('commit');
    expect(claimed).toHaveLength(16);
    // Sixteen payloads taken and their look-ups, where a scan of the queue reads 4,000 and more.
    expect(claimRead).toBeLessThan(300);

    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    await completeAttempts(
      session,
      claimed.map((row) => settleOf({ payloadId: row.payload_id, series: row.series, attemptNo: row.attempt })),
    );
    const next = await claimPayloads(session, {
      now: new Date(),
      max: 16,
      share: 16,
      after: null,
      expireAfterSeconds: 86_400,
    });
    const settleRead = await rowsReadInTransaction(session);
    await session.query('commit');
    expect(next).toHaveLength(16);
    // Sixteen results written and sixteen payloads taken, where a scan of the queue reads 4,000 and more.
    expect(settleRead).toBeLessThan(600);
  } finally {
    await session.end();
    await db.pool.query('alter table asset_webhooks.payloads reset (autovacuum_enabled)');
  }
});
