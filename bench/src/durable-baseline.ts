import pg from 'pg';
import { Agent, request } from 'undici';

/**
 * Writes items in batches with at most `maxInFlight` writes at once, as the
 * service's completer writes results (src/delivery/completer.ts, which keeps
 * two writes in flight): an item is written at once when a
 * write is free; otherwise it waits with the others that come meanwhile, and
 * up to `maxBatch` of them are written together as soon as a write finishes.
 * A lone item never waits for company. Every item's promise settles with its
 * batch's write.
 */
export class BatchWriter<T> {
  private waiting: Array<{ item: T; resolve: () => void; reject: (error: unknown) => void }> = [];
  private inFlight = 0;

  constructor(
    private readonly writeBatch: (items: readonly T[]) => Promise<void>,
    private readonly maxBatch = 64,
    private readonly maxInFlight = 1,
  ) {}

  write(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      this.inFlight += 1;
      this.writeBatch(batch.map((entry) => entry.item))
        .then(
          () => batch.forEach((entry) => entry.resolve()),
          (error: unknown) => batch.forEach((entry) => entry.reject(error)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.next();
        });
    }
  }
}

/** One attempt's record, as the service keeps it for a delivered payload. */
export interface AttemptRow {
  readonly payloadId: number;
  readonly startedAt: Date;
  readonly durationMs: number;
  readonly statusCode: number;
  readonly excerpt: string;
}

/** The scratch table the baseline writes: the columns, key and checks of asset_webhooks.attempt_log (no foreign key). */
export const SCRATCH_TABLE = 'aw_bench_scratch.attempts';

export async function createScratchAttempts(pool: pg.Pool): Promise<void> {
  await pool.query(`create schema if not exists aw_bench_scratch`);
  // LIKE copies the columns, defaults, checks and primary key, and never a foreign key.
  await pool.query(
    `create table if not exists ${SCRATCH_TABLE}
       (like asset_webhooks.attempt_log including defaults including constraints including indexes)`,
  );
}

/**
 * A connection pool whose sessions commit synchronously whatever the server's
 * default: the baseline must pay for a durable commit of every batch, as the
 * service's settle statement does.
 */
export function durablePool(databaseUrl: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: 1,
    application_name: 'asset-webhooks bench baseline',
    options: '-c synchronous_commit=on',
  });
  pool.on('error', () => {});
  return pool;
}

/** Inserts one batch of attempt rows with one statement (and so one commit). */
export async function insertAttempts(pool: pg.Pool, rows: readonly AttemptRow[]): Promise<void> {
  await pool.query(
    `insert into ${SCRATCH_TABLE} (payload_id, series, attempt_no, started_at, duration_ms, status_code, response_excerpt, outcome, process_id)
     select u.payload_id, 1, 1, u.started_at, u.duration_ms, u.status_code, u.excerpt, 'delivered', 'bench-baseline'
     from unnest($1::bigint[], $2::timestamptz[], $3::int[], $4::int[], $5::text[])
       as u(payload_id, started_at, duration_ms, status_code, excerpt)`,
    [
      rows.map((row) => row.payloadId),
      rows.map((row) => row.startedAt),
      rows.map((row) => row.durationMs),
      rows.map((row) => row.statusCode),
      rows.map((row) => row.excerpt),
    ],
  );
}

/**
 * The durable baseline of delivery: `payloads` POSTs of `body` to `url`,
 * `concurrency` at once with undici, each answer recorded as one committed
 * attempt row through a BatchWriter (64 rows a statement, one statement in
 * flight). A slot sends its next request as soon as it has read an answer,
 * but only once its result from two requests back is committed, so no slot
 * runs more than two unrecorded results ahead of the database. Returns
 * payloads per second, from the first request to the last row committed.
 */
export async function durableBaseline(
  url: string,
  body: string,
  writer: pg.Pool,
  options: { payloads: number; concurrency: number },
): Promise<number> {
  await writer.query(`truncate ${SCRATCH_TABLE}`);
  const agent = new Agent({ keepAliveTimeout: 60_000 });
  const batcher = new BatchWriter<AttemptRow>((rows) => insertAttempts(writer, rows));
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      let previous: Promise<void> = Promise.resolve();
      while (next < options.payloads) {
        next += 1;
        const payloadId = next;
        const startedAt = new Date();
        const sentAt = performance.now();
        const response = await request(url, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json' },
          dispatcher: agent,
        });
        const excerpt = (await response.body.text()).slice(0, 1024);
        const recorded = batcher.write({
          payloadId,
          startedAt,
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
  const rate = options.payloads / (Number(process.hrtime.bigint() - started) / 1e9);
  await agent.close();
  return rate;
}

/** The server's synchronous_commit as the baseline's sessions see it; the bench refuses anything but `on`. */
export async function synchronousCommitOf(writer: pg.Pool): Promise<string> {
  const { rows } = await writer.query<{ synchronous_commit: string }>('show synchronous_commit');
  return rows[0]!.synchronous_commit;
}
