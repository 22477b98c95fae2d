import { existsSync } from 'node:fs';
import pg from 'pg';
import { expect, it } from 'vitest';
import {
  busyCpus,
  measuredSplit,
  postgresCpuSeconds,
  postmasterOf,
  processCpuSeconds,
  processSchedSeconds,
  withCpu,
} from '../src/cpu.js';
import { measured } from '../src/stats.js';
import { startEmbeddedPostgres } from '../../src/embedded/embedded-postgres.js';
import { useTestDatabase } from '../../test/helpers/test-database.js';

// The benchmark splits coalescing's and delivery's CPU between Node, PostgreSQL
// and the receiver from /proc. These check the readings against independent
// accounts: Node's own for this process, and the backend's own process for
// PostgreSQL. Other test files start and stop servers of their own meanwhile:
// only the server under test is counted.

const db = useTestDatabase();
const linux = existsSync('/proc/self/stat');

/** Busy until Node itself counts `seconds` of CPU for this process. */
function spin(seconds: number): void {
  const start = process.cpuUsage();
  for (;;) {
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1e6 >= seconds) return;
  }
}

it.runIf(linux)('reads a process CPU time as Node itself counts it', () => {
  const before = processCpuSeconds(process.pid)!;
  spin(0.3);
  const after = processCpuSeconds(process.pid)!;
  // /proc counts in 10 ms ticks; Node's count is exact.
  expect(after - before).toBeGreaterThanOrEqual(0.28);
  expect(processCpuSeconds(2 ** 22 + 1)).toBeUndefined(); // above Linux's largest pid
});

it.runIf(linux)('reads a process CPU time in nanoseconds from its schedstat, as Node counts it', () => {
  const before = processSchedSeconds(process.pid)!;
  spin(0.3);
  const after = processSchedSeconds(process.pid)!;
  // /proc/<pid>/schedstat counts the main thread; Node's count also has its helper threads, idle here.
  expect(after - before).toBeGreaterThanOrEqual(0.25);
  expect(after - before).toBeLessThan(1);
  expect(processSchedSeconds(2 ** 22 + 1)).toBeUndefined();
});

it.runIf(linux)('counts the CPU of a PostgreSQL backend on this machine in the PostgreSQL total', async (context) => {
  const client = await db.pool.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    const backend = rows[0]!.pid;
    // A server on another machine (TEST_DATABASE_URL) has no process here to read.
    if (processCpuSeconds(backend) === undefined) context.skip();
    const postmaster = (await postmasterOf(client))!;
    const backendBefore = processSchedSeconds(backend)!;
    const totalBefore = postgresCpuSeconds(postmaster)!;
    await client.query('select count(*) from generate_series(1, 3000000)');
    const backendUsed = processSchedSeconds(backend)! - backendBefore;
    const totalUsed = postgresCpuSeconds(postmaster)! - totalBefore;
    expect(backendUsed).toBeGreaterThan(0.05);
    // Both count the backend by its schedstat (nanoseconds): the two
    // differences can disagree in the last bits of the division, not more.
    expect(totalUsed).toBeGreaterThanOrEqual(backendUsed - 1e-9);
  } finally {
    client.release();
  }
});

it.runIf(linux)('keeps the CPU of a backend that exits within the span in the PostgreSQL total', async (context) => {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  const backend = rows[0]!.pid;
  if (processCpuSeconds(backend) === undefined) {
    await client.end();
    context.skip();
  }
  const postmaster = (await postmasterOf(client as unknown as pg.PoolClient))!;
  const backendBefore = processSchedSeconds(backend)!;
  const totalBefore = postgresCpuSeconds(postmaster)!;
  await client.query('select count(*) from generate_series(1, 3000000)');
  const backendUsed = processSchedSeconds(backend)! - backendBefore;
  await client.end();
  // Until the postmaster has reaped it.
  for (let waited = 0; processCpuSeconds(backend) !== undefined && waited < 10_000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(processCpuSeconds(backend)).toBeUndefined();
  expect(backendUsed).toBeGreaterThan(0.05);
  expect(postgresCpuSeconds(postmaster)! - totalBefore).toBeGreaterThanOrEqual(backendUsed - 0.02);
});

it.runIf(linux)(
  "splits a span's CPU per unit of work between Node, PostgreSQL and other processes by name",
  async (context) => {
    const client = await db.pool.connect();
    try {
      const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
      if (processCpuSeconds(rows[0]!.pid) === undefined) context.skip();
      const samples: Record<string, number[]> = {};
      // Four units of work: the backend counts the query's CPU, this process its spin, the other process (the backend again, by name) too.
      await withCpu(
        samples,
        4,
        { postmaster: await postmasterOf(client), others: { backend: rows[0]!.pid } },
        async () => {
          await client.query('select count(*) from generate_series(1, 3000000)');
          spin(0.2);
        },
      );
      expect(Object.keys(samples).sort()).toEqual(['backend', 'node', 'postgres']);
      expect(samples.node![0]!).toBeGreaterThanOrEqual((0.18 * 1e6) / 4);
      expect(samples.backend![0]!).toBeGreaterThan((0.05 * 1e6) / 4);
      expect(samples.postgres![0]!).toBeGreaterThanOrEqual(samples.backend![0]! - 1e-3);
      // As the bench reports them: medians by party, none when a party was never read.
      expect(measuredSplit(samples, ['node', 'backend'])).toEqual({
        node: measured(samples.node!),
        backend: measured(samples.backend!),
      });
      expect(measuredSplit(samples, ['node', 'receiver'])).toBeUndefined();
      // A warm-up round records nothing.
      await withCpu(undefined, 4, { postmaster: await postmasterOf(client) }, async () => undefined);
      expect(samples.node).toHaveLength(1);
    } finally {
      client.release();
    }
  },
);

it.runIf(linux)(
  'counts only the server under test: another server that works and stops within the span takes nothing away',
  async (context) => {
    const postmaster = await postmasterOf(db.pool);
    if (postmaster === undefined || processCpuSeconds(postmaster) === undefined) context.skip();
    const other = await startEmbeddedPostgres();
    try {
      const client = new pg.Client({ connectionString: other.url });
      await client.connect();
      const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
      const otherBackend = rows[0]!.pid;
      const otherBefore = processCpuSeconds(otherBackend)!;
      await client.query('select count(*) from generate_series(1, 3000000)');
      const otherUsed = processCpuSeconds(otherBackend)! - otherBefore;
      await client.end();
      // The other server stops within the span, after its work: a machine-wide sum lost all of it and went negative.
      const before = postgresCpuSeconds(postmaster!)!;
      await other.stop();
      const used = postgresCpuSeconds(postmaster!)! - before;
      expect(otherUsed).toBeGreaterThan(0.05);
      // Other test files work on the server under test meanwhile, so only the sign can be asserted.
      expect(used).toBeGreaterThanOrEqual(-1e-9);
    } finally {
      await other.stop().catch(() => {});
    }
  },
);

it.runIf(linux)(
  'finds no local server for a backend pid that is another program here (a server elsewhere)',
  async () => {
    // What a server on another machine answers can be any pid; here it is this Node process's own.
    const elsewhere = { query: async () => ({ rows: [{ pid: process.pid }] }) } as unknown as pg.Pool;
    await expect(postmasterOf(elsewhere)).resolves.toBeUndefined();
    await expect(postmasterOf(db.pool)).resolves.toBeGreaterThan(1);
  },
);

it('counts the CPUs a side kept busy round by round: its CPU per unit times its rate', () => {
  // Two rounds: 10 + 30 µs an event at 25,000 events/s, then 20 + 40 µs at 20,000.
  const split = { node: measured([10, 20]), postgres: measured([30, 40]) };
  const busy = busyCpus(split, [25_000, 20_000])!;
  expect(busy.runs[0]).toBeCloseTo(1.0, 9);
  expect(busy.runs[1]).toBeCloseTo(1.2, 9);
  expect(busy.median).toBeCloseTo(1.1, 9);
  // Rounds that do not pair up give nothing rather than a wrong figure.
  expect(busyCpus(split, [25_000])).toBeUndefined();
});
