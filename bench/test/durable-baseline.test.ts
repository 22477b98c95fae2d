import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  BatchWriter,
  createScratchAttempts,
  durableBaseline,
  durablePool,
  SCRATCH_TABLE,
  synchronousCommitOf,
} from '../src/durable-baseline.js';
import { useTestDatabase } from '../../test/helpers/test-database.js';

// The durable baseline is what delivery's ratio is measured against: these
// check that it batches as the settle batcher does, and that every request it
// sends ends as one committed attempt row.

const db = useTestDatabase();

/** Lets the batch writer start its next write once the previous one has finished. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A write that holds each batch until the test lets it go. */
function heldWrites(): {
  batches: number[][];
  release: () => void;
  write: (items: readonly number[]) => Promise<void>;
} {
  const batches: number[][] = [];
  const pending: Array<() => void> = [];
  return {
    batches,
    release: () => pending.shift()?.(),
    write: (items) => {
      batches.push([...items]);
      return new Promise<void>((resolve) => pending.push(resolve));
    },
  };
}

it('writes a lone item at once, and what comes meanwhile together, at most maxBatch a write', async () => {
  const held = heldWrites();
  const writer = new BatchWriter<number>(held.write, 3);
  const done = [1, 2, 3, 4, 5, 6].map((item) => writer.write(item));
  expect(held.batches).toEqual([[1]]);
  held.release();
  await done[0];
  await turn();
  expect(held.batches).toEqual([[1], [2, 3, 4]]);
  held.release();
  await done[3];
  await turn();
  expect(held.batches).toEqual([[1], [2, 3, 4], [5, 6]]);
  held.release();
  await Promise.all(done);
});

it('fails every item of a batch whose write fails, and goes on with the next', async () => {
  let calls = 0;
  const writer = new BatchWriter<number>(async () => {
    calls += 1;
    if (calls === 2) throw new Error('refused');
  });
  const first = writer.write(1);
  const second = [writer.write(2), writer.write(3)];
  await first;
  await expect(second[0]).rejects.toThrow('refused');
  await expect(second[1]).rejects.toThrow('refused');
  await writer.write(4);
  expect(calls).toBe(3);
});

let server: Server;
let url: string;
let received = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received += 1;
      res.writeHead(received % 2 === 0 ? 202 : 200).end('fine');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

it('commits one attempt row per request, synchronously, with what the receiver answered', async () => {
  await createScratchAttempts(db.pool);
  const writer = durablePool(db.url);
  try {
    expect(await synchronousCommitOf(writer)).toBe('on');
    const rate = await durableBaseline(url, '{"events":[]}', writer, { payloads: 150, concurrency: 8 });
    expect(rate).toBeGreaterThan(0);
    expect(received).toBe(150);
    const { rows } = await db.pool.query<{ n: number; ids: number; ok: number; excerpts: string[] }>(
      `select count(*)::int as n, count(distinct payload_id)::int as ids,
              count(*) filter (where status_code = 200)::int as ok, array_agg(distinct response_excerpt) as excerpts
       from ${SCRATCH_TABLE}`,
    );
    expect(rows[0]).toEqual({ n: 150, ids: 150, ok: 75, excerpts: ['fine'] });
    // A second round starts from an empty table.
    await durableBaseline(url, '{}', writer, { payloads: 10, concurrency: 2 });
    const again = await db.pool.query<{ n: number }>(`select count(*)::int as n from ${SCRATCH_TABLE}`);
    expect(again.rows[0]!.n).toBe(10);
  } finally {
    await writer.end();
  }
});
