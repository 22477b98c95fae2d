import type pg from 'pg';
import { Agent, request } from 'undici';
import { BatchWriter } from './durable-baseline.js';

/**
 * The fair baseline of delivery: the least a sender must do that keeps its
 * bodies in the database and records that a request is about to leave before
 * it leaves, as the service does. Per block of `concurrency` payloads, one
 * statement reads the stored bodies and inserts one "started" row each; the
 * block's POSTs follow; each answer is inserted as a result row afterwards,
 * up to 64 a statement with one statement in flight (the service's completer
 * batches the same way, with two in flight). Every session commits synchronously. What the service does beyond
 * this (payload states, slots, standbys, retries, expiry) is what its ratio
 * to this baseline measures.
 */

export const FAIR_BODIES = 'aw_bench_scratch.fair_bodies';
/** Shaped like asset_webhooks.attempt_log (columns, key and checks, no foreign key): a started attempt. */
export const FAIR_STARTED = 'aw_bench_scratch.fair_started';
export const FAIR_RESULTS = 'aw_bench_scratch.fair_results';

/** The scratch tables; the bodies' column compresses as payloads.body does, so reading a body costs the same. */
export async function createFairTables(pool: pg.Pool): Promise<void> {
  await pool.query(`create schema if not exists aw_bench_scratch`);
  await pool.query(`create table if not exists ${FAIR_BODIES} (payload_id bigint primary key, body text not null)`);
  const { rows } = await pool.query<{ method: string }>(
    `select attcompression::text as method from pg_attribute
     where attrelid = 'asset_webhooks.payloads'::regclass and attname = 'body'`,
  );
  const method = { p: 'pglz', l: 'lz4' }[rows[0]?.method ?? ''];
  if (method) await pool.query(`alter table ${FAIR_BODIES} alter column body set compression ${method}`);
  await pool.query(
    `create table if not exists ${FAIR_STARTED}
       (like asset_webhooks.attempt_log including defaults including constraints including indexes)`,
  );
  await pool.query(
    `create table if not exists ${FAIR_RESULTS} (
       payload_id bigint primary key,
       finished_at timestamptz not null,
       duration_ms integer not null,
       status_code integer not null,
       response_excerpt text,
       outcome text not null
     )`,
  );
}

/** Empties the scratch tables and stores `payloads` copies of `body`, numbered from 1: a round's set-up, not measured. */
export async function storeFairBodies(pool: pg.Pool, body: string, payloads: number): Promise<void> {
  await pool.query(`truncate ${FAIR_BODIES}, ${FAIR_STARTED}, ${FAIR_RESULTS}`);
  await pool.query(`insert into ${FAIR_BODIES} (payload_id, body) select g, $1 from generate_series(1, $2::int) g`, [
    body,
    payloads,
  ]);
  await pool.query(`analyze ${FAIR_BODIES}`);
}

interface Claimed {
  readonly payloadId: number;
  readonly body: string;
}

/** One block: the bodies of payloads `from`..`to`, each with its started row, in one statement (one commit). */
export async function claimBlock(claims: pg.Pool, from: number, to: number): Promise<Claimed[]> {
  const { rows } = await claims.query<{ payload_id: string; body: string }>(
    `with block as (
       select payload_id, body from ${FAIR_BODIES} where payload_id between $1 and $2
     ),
     started as (
       insert into ${FAIR_STARTED} (payload_id, series, attempt_no, started_at, process_id)
       select payload_id, 1, 1, clock_timestamp(), 'bench-fair' from block
     )
     select payload_id, body from block order by payload_id`,
    [from, to],
  );
  return rows.map((row) => ({ payloadId: Number(row.payload_id), body: row.body }));
}

interface ResultRow {
  readonly payloadId: number;
  readonly durationMs: number;
  readonly statusCode: number;
  readonly excerpt: string;
}

async function insertResults(results: pg.Pool, rows: readonly ResultRow[]): Promise<void> {
  await results.query(
    `insert into ${FAIR_RESULTS} (payload_id, finished_at, duration_ms, status_code, response_excerpt, outcome)
     select u.payload_id, clock_timestamp(), u.duration_ms, u.status_code, u.excerpt, 'delivered'
     from unnest($1::bigint[], $2::int[], $3::int[], $4::text[]) as u(payload_id, duration_ms, status_code, excerpt)`,
    [
      rows.map((row) => row.payloadId),
      rows.map((row) => row.durationMs),
      rows.map((row) => row.statusCode),
      rows.map((row) => row.excerpt),
    ],
  );
}

/**
 * The blocks, claimed one at a time: the next block's statement starts when
 * the last body of the block before has been taken by a slot, so it overlaps
 * that block's requests and no slot waits for it unless the requests are
 * faster than the claim.
 */
class BlockQueue {
  private readonly queue: Claimed[] = [];
  private claimed = 0;
  private claiming: Promise<void> | undefined;

  constructor(
    private readonly claims: pg.Pool,
    private readonly payloads: number,
    private readonly blockSize: number,
  ) {}

  /** The next body to send, or undefined once every payload has been handed out. */
  async take(): Promise<Claimed | undefined> {
    while (this.queue.length === 0) {
      if (this.claimed >= this.payloads && this.claiming === undefined) return undefined;
      await this.claimNext();
    }
    const next = this.queue.shift()!;
    if (this.queue.length === 0) void this.claimNext().catch(() => {}); // a failure reaches the slot that awaits it next
    return next;
  }

  private claimNext(): Promise<void> {
    if (this.claiming) return this.claiming;
    if (this.claimed >= this.payloads) return Promise.resolve();
    const from = this.claimed + 1;
    const to = Math.min(this.claimed + this.blockSize, this.payloads);
    this.claimed = to;
    const claiming = claimBlock(this.claims, from, to).then((rows) => {
      if (rows.length !== to - from + 1)
        throw new Error(`fair baseline: block ${from}..${to} read ${rows.length} bodies; the scratch table is short`);
      this.queue.push(...rows);
    });
    this.claiming = claiming;
    // Cleared only on success: a failed claim keeps failing every slot that asks.
    void claiming.then(
      () => (this.claiming = undefined),
      () => {},
    );
    return claiming;
  }
}

/**
 * `payloads` POSTs of the stored bodies to `url`, `concurrency` at once
 * (undici), claimed in blocks through `claims` and recorded through
 * `results` (one connection each; see the file's comment). A slot runs at
 * most two unrecorded results ahead, as in the durable baseline. Returns
 * payloads per second, from the first claim to the last result committed.
 * The bodies must have been stored (storeFairBodies).
 */
export async function fairBaseline(
  url: string,
  connections: { readonly claims: pg.Pool; readonly results: pg.Pool },
  options: { payloads: number; concurrency: number },
): Promise<number> {
  const agent = new Agent({ keepAliveTimeout: 60_000 });
  const blocks = new BlockQueue(connections.claims, options.payloads, options.concurrency);
  const batcher = new BatchWriter<ResultRow>((rows) => insertResults(connections.results, rows));
  const started = process.hrtime.bigint();
  try {
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        let previous: Promise<void> = Promise.resolve();
        for (let next = await blocks.take(); next !== undefined; next = await blocks.take()) {
          const sentAt = performance.now();
          const response = await request(url, {
            method: 'POST',
            body: next.body,
            headers: { 'content-type': 'application/json' },
            dispatcher: agent,
          });
          const excerpt = (await response.body.text()).slice(0, 1024);
          const recorded = batcher.write({
            payloadId: next.payloadId,
            durationMs: Math.round(performance.now() - sentAt),
            statusCode: response.statusCode,
            excerpt,
          });
          // Awaited two requests later; a failed write must not count as unhandled meanwhile.
          recorded.catch(() => {});
          await previous;
          previous = recorded;
        }
        await previous;
      }),
    );
    return options.payloads / (Number(process.hrtime.bigint() - started) / 1e9);
  } finally {
    await agent.close();
  }
}
