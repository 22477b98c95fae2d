import pg from 'pg';
import { beforeEach, expect, it } from 'vitest';
import { pino } from 'pino';
import { claimChunk } from '../../src/coalesce/claim.js';
import { outboxHighWater, recordRunStart } from '../../src/coalesce/run-start.js';
import { chunkStatements } from '../../src/coalesce/persist.js';
import { NOTHING_SEEN } from '../../src/payloads/seen-row.js';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Housekeeping and the coalescer's reads must cost what they handle, not the
// size of the history kept or of the whole backlog, whatever the statistics
// (the indexes of sql/migrations/0001_baseline.sql, and claimChunk). Rows
// read are counted from the server's table statistics.

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
});

/** Heap rows read from `table` so far: by sequential scans and fetched through indexes. */
async function rowsRead(table: string): Promise<number> {
  await db.pool.query('select pg_stat_force_next_flush()');
  const { rows } = await db.pool.query<{ n: string }>(
    'select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n from pg_stat_user_tables where relid = $1::regclass',
    [table],
  );
  return Number(rows[0]!.n);
}

it('purges expired history without reading the history it keeps, with statistics taken while the tables were empty', async () => {
  await db.pool.query('analyze asset_webhooks.payloads, asset_webhooks.events');
  // 3,000 payloads and events within the retention, 5 of each beyond it.
  await db.pool.query(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at, delivered_at)
     select 'crm', 'delivered', '{}', 2, 0, '{}', now() - make_interval(days => case when n <= 5 then 40 else 1 end),
            now() - make_interval(days => case when n <= 5 then 40 else 1 end)
     from generate_series(1, 3005) n`,
  );
  await db.pool.query(
    `insert into asset_webhooks.events (event_id, seq, occurred_at, event_type, asset_id, run_id, coalesced_at)
     select gen_random_uuid(), n, now(), 'EDITED', n, 1, now() - make_interval(days => case when n <= 5 then 40 else 1 end)
     from generate_series(1, 3005) n`,
  );
  const before = {
    payloads: await rowsRead('asset_webhooks.payloads'),
    events: await rowsRead('asset_webhooks.events'),
  };
  // One connection, so that its counts can be flushed before they are read.
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  try {
    const result = await runMaintenance({ pool, retentionDays: 30, logger: pino({ level: 'silent' }) });
    expect(result.deleted).toEqual({ events: 5, payloads: 5 });
    await pool.query('select pg_stat_force_next_flush()');
  } finally {
    await pool.end();
  }
  const read = {
    payloads: (await rowsRead('asset_webhooks.payloads')) - before.payloads,
    events: (await rowsRead('asset_webhooks.events')) - before.events,
  };
  // The 5 due rows of each and the deletes' own look-ups, where a scan reads all 3,005.
  expect(read.payloads).toBeLessThan(100);
  expect(read.events).toBeLessThan(100);
});

it('removes payloads, runs and ticks that ended before the retention, by when they ended, whatever their age', async () => {
  const old = "now() - interval '40 days'";
  const recent = "now() - interval '1 day'";
  const { rows } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at, delivered_at, dead_letter_reason, dead_lettered_at)
     values ('crm', 'delivered', '{}', 2, 0, '{}', ${old}, ${old}, null, null),
            ('crm', 'dead_lettered', '{}', 2, 0, '{}', ${old}, null, 'rejected', ${old}),
            -- Old payloads an operator redelivered: they ended again recently.
            ('crm', 'delivered', '{}', 2, 0, '{}', ${old}, ${recent}, null, null),
            ('crm', 'dead_lettered', '{}', 2, 0, '{}', ${old}, null, 'rejected', ${recent}),
            ('crm', 'pending', '{}', 2, 0, '{}', ${old}, null, null, null)
     returning payload_id`,
  );
  await db.pool.query(`insert into asset_webhooks.coalesce_runs (started_at) values (${old}), (${recent})`);
  await db.pool.query(`insert into asset_webhooks.ticks (slot, created_at) values (1, ${old}), (2, ${recent})`);
  const result = await runMaintenance({ pool: db.pool, retentionDays: 30, logger: pino({ level: 'silent' }) });
  expect(result.deleted).toEqual({ payloads: 2, coalesce_runs: 1, ticks: 1 });
  const kept = await db.pool.query<{ payload_id: number }>(
    'select payload_id from asset_webhooks.payloads order by payload_id',
  );
  expect(kept.rows.map((row) => row.payload_id)).toEqual(rows.slice(2).map((row) => row.payload_id));
  const runs = await db.pool.query<{ recent: boolean }>(
    "select started_at > now() - interval '2 days' as recent from asset_webhooks.coalesce_runs",
  );
  expect(runs.rows).toEqual([{ recent: true }]);
  const ticks = await db.pool.query<{ slot: number }>('select slot from asset_webhooks.ticks');
  expect(ticks.rows).toEqual([{ slot: 2 }]);
});

it('reads one chunk of a large outbox backlog per claim when its statistics were taken while it was empty', async () => {
  await db.pool.query('analyze asset_webhooks.outbox');
  await db.pool.query(
    `insert into asset_webhooks.outbox (event_type, asset_id, supertype)
     select 'EDITED', n, 'Resource' from generate_series(1, 60000) n`,
  );
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  try {
    const maxSeq = (await outboxHighWater(db.pool))!;
    const ids = await recordRunStart(session as unknown as pg.PoolClient, maxSeq);
    // In a transaction whose own counts hold only what the claim read: the
    // session's earlier counts are flushed first (they would show there too).
    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    const chunk = await claimChunk(session as unknown as pg.PoolClient, ids, maxSeq, 0, 2000);
    const { rows } = await session.query<{ n: string }>(
      `select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n from pg_stat_xact_user_tables
       where relid = 'asset_webhooks.outbox'::regclass`,
    );
    await session.query('commit');
    expect(chunk.events).toHaveLength(2000);
    expect(chunk).toMatchObject({ read: 2000, deferred: 0 });
    // The chunk's 2,000 rows, where reading the backlog reads 60,000. (Below a
    // backlog of some 20,000-60,000 rows the planner may still prefer reading it
    // whole and sorting: bounded, and cheap at that size.)
    expect(Number(rows[0]!.n)).toBeLessThan(2500);
    // The upper bound still holds: rows captured after the run began are left for the next run.
    const last = chunk.events[1999]!.seq;
    expect(chunk.lastSeq).toBe(last);
    const bounded = await claimChunk(session as unknown as pg.PoolClient, ids, last + 500, last, 2000);
    expect(bounded.events.map((event) => event.seq)).toEqual(Array.from({ length: 500 }, (_, i) => last + 1 + i));
  } finally {
    await session.end();
  }
});

it('consumes a chunk of a large outbox backlog reading only that chunk, when its statistics were taken while it was empty', async () => {
  await db.pool.query('analyze asset_webhooks.outbox');
  await db.pool.query(
    `insert into asset_webhooks.outbox (event_type, asset_id, supertype)
     select 'EDITED', n, 'Resource' from generate_series(1, 60000) n`,
  );
  const { rows: chunk } = await db.pool.query<{ seq: number }>(
    'select seq from asset_webhooks.outbox order by seq offset 20000 limit 2000',
  );
  const seqs = chunk.map((row) => row.seq);
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  try {
    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    // The chunk's statement as a run writes it, with no payloads.
    const [statement] = chunkStatements(
      1,
      1,
      {
        seqs,
        eventIds: seqs.map((seq) => `00000000-0000-7000-8000-${seq.toString(16).padStart(12, '0')}`),
        atomIds: seqs.map(() => null),
        assetUuids: seqs.map(() => null),
        collapsedInto: seqs.map(() => null),
        seen: seqs.map(() => NOTHING_SEEN),
        deliveredTo: seqs.map(() => []),
        payloadIds: seqs.map(() => []),
        unmatchedTo: seqs.map(() => []),
        inTrash: seqs.map(() => false),
        raisedTimestamps: seqs.map(() => null),
      },
      [],
      [],
      new Date().toISOString(),
    );
    await session.query(statement!.text, statement!.values);
    const { rows } = await session.query<{ n: string; deleted: string }>(
      `select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n, n_tup_del as deleted from pg_stat_xact_user_tables
       where relid = 'asset_webhooks.outbox'::regclass`,
    );
    await session.query('rollback');
    expect(Number(rows[0]!.deleted)).toBe(2000);
    // The chunk's 2,000 rows, where scanning the outbox read all 60,000 (for every chunk, before the list of seqs became a filter).
    expect(Number(rows[0]!.n)).toBeLessThan(2500);
  } finally {
    await session.end();
  }
});
