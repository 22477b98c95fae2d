import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { durablePool, synchronousCommitOf } from '../src/durable-baseline.js';
import { createFairTables, fairBaseline, FAIR_RESULTS, FAIR_STARTED, storeFairBodies } from '../src/fair-baseline.js';
import { useTestDatabase } from '../../test/helpers/test-database.js';

// The fair baseline is what delivery's ratio_to_fair_baseline is measured
// against: these check that it reads the stored bodies in blocks, records each
// request's start before the request leaves, and each result after it.

const db = useTestDatabase();

let server: Server;
let url: string;
const bodies: string[] = [];
/** For each request, in the order they arrived: how many started rows were committed when it was handled. */
const startedWhenReceived: Array<Promise<number>> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString());
      startedWhenReceived.push(
        db.pool.query<{ n: number }>(`select count(*)::int as n from ${FAIR_STARTED}`).then(({ rows }) => rows[0]!.n),
      );
      res.writeHead(bodies.length % 2 === 0 ? 202 : 200).end('fine');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

it('sends the stored bodies, each after its started row and before its result row, both committed synchronously', async () => {
  await createFairTables(db.pool);
  const claims = durablePool(db.url);
  const results = durablePool(db.url);
  try {
    expect(await synchronousCommitOf(claims)).toBe('on');
    expect(await synchronousCommitOf(results)).toBe('on');
    const body = JSON.stringify({ events: [{ eventId: 'stored' }] });
    await storeFairBodies(db.pool, body, 150);
    const rate = await fairBaseline(url, { claims, results }, { payloads: 150, concurrency: 8 });
    expect(rate).toBeGreaterThan(0);
    expect(bodies).toHaveLength(150);
    expect(new Set(bodies)).toEqual(new Set([body]));
    // The n-th request found at least n started rows: none left before its start was committed.
    const counts = await Promise.all(startedWhenReceived);
    counts.forEach((count, index) => expect(count).toBeGreaterThanOrEqual(index + 1));
    const { rows } = await db.pool.query<{ started: number; finished: number; ok: number; late: number }>(
      `select count(s.payload_id)::int as started, count(r.payload_id)::int as finished,
              count(*) filter (where r.status_code = 200)::int as ok,
              count(*) filter (where r.finished_at < s.started_at)::int as late
       from ${FAIR_STARTED} s full join ${FAIR_RESULTS} r using (payload_id)`,
    );
    expect(rows[0]).toEqual({ started: 150, finished: 150, ok: 75, late: 0 });
  } finally {
    await claims.end();
    await results.end();
  }
});

it('starts a block of `concurrency` payloads per statement, and records results at most 64 a statement', async () => {
  await createFairTables(db.pool);
  const claims = durablePool(db.url);
  const results = durablePool(db.url);
  try {
    await storeFairBodies(db.pool, '{}', 150);
    await fairBaseline(url, { claims, results }, { payloads: 150, concurrency: 8 });
    // One statement, one transaction: rows written together share their xmin.
    const blocks = await db.pool.query<{ size: number; first: string; last: string }>(
      `select count(*)::int as size, min(payload_id)::text as first, max(payload_id)::text as last
       from ${FAIR_STARTED} group by xmin::text::bigint order by min(payload_id)`,
    );
    expect(blocks.rows.map((block) => block.size)).toEqual([...Array<number>(18).fill(8), 6]);
    const batches = await db.pool.query<{ size: number }>(
      `select count(*)::int as size from ${FAIR_RESULTS} group by xmin::text::bigint`,
    );
    expect(batches.rows.reduce((sum, batch) => sum + batch.size, 0)).toBe(150);
    expect(Math.max(...batches.rows.map((batch) => batch.size))).toBeLessThanOrEqual(64);
  } finally {
    await claims.end();
    await results.end();
  }
});
