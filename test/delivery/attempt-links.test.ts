import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import type { ClaimedPayload } from '../../src/delivery/attempt-store.js';
import { endAttemptSpan, MAX_CAPTURED_LINKS, startAttemptSpan } from '../../src/delivery/attempt-span.js';
import { rowsReadInTransaction } from '../helpers/rows-read.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// With tracing on, an attempt's span links to the contexts captured with its
// payload's events and with the edits collapsed into them, and to the run
// that made it: one read by the payload's id that reads those events, never
// the history, whatever else the events table holds.

const db = useTestDatabase();
const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });

beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
});
beforeEach(async () => {
  await resetData(db.pool);
  exporter.reset();
});

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

/** The traceparent of DAM transaction `n`. */
function context(n: number): string {
  return `00-${hex(n + 1, 32)}-${hex(n + 1, 16)}-01`;
}

/**
 * `history` events of other payloads (every one with a context), then a
 * payload of `delivered` events, each with edits collapsed into it
 * (`collapsedEach`), every change from a transaction of its own that set a
 * context unless `traced` is false. Returns the payload's id.
 */
async function seed(history: number, delivered: number, collapsedEach: number, traced = true): Promise<number> {
  await db.pool.query(
    `insert into asset_webhooks.coalesce_runs (run_id, traceparent) overriding system value values (7, $1)`,
    [`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`],
  );
  await db.pool.query(
    `insert into asset_webhooks.events (event_id, occurred_at, event_type, asset_id, coalesced_at, run_id, traceparent)
     select ('00000000-0000-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, now(), 'EDITED', n, now(), 1,
            '00-' || lpad(to_hex(n + 1000000), 32, '0') || '-' || lpad(to_hex(n + 1000000), 16, '0') || '-01'
     from generate_series(1, $1::int) n`,
    [history],
  );
  const ids: string[] = [];
  for (let i = 0; i < delivered; i += 1) {
    const id = `10000000-0000-7000-8000-${hex(i, 12)}`;
    ids.push(id);
    await db.pool.query(
      `insert into asset_webhooks.events (event_id, occurred_at, event_type, asset_id, coalesced_at, run_id, traceparent)
       values ($1, now(), 'EDITED', $2, now(), 7, $3)`,
      [id, 100_000 + i, traced ? context(i * (collapsedEach + 1)) : null],
    );
    for (let j = 1; j <= collapsedEach; j += 1)
      await db.pool.query(
        `insert into asset_webhooks.events
           (event_id, occurred_at, event_type, asset_id, coalesced_at, run_id, collapsed_into, traceparent)
         values ($1, now(), 'EDITED', $2, now(), 7, $3, $4)`,
        [
          `20000000-0000-7000-8000-${hex(i * 100 + j, 12)}`,
          100_000 + i,
          id,
          traced ? context(i * (collapsedEach + 1) + j) : null,
        ],
      );
  }
  const { rows } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, run_id, status, body, byte_size, event_count, event_ids, series_started_at)
     values ('crm', 7, 'pending', '[]', 2, $1, $2::uuid[], now()) returning payload_id`,
    [ids.length, ids],
  );
  await db.pool.query('analyze asset_webhooks.events');
  return rows[0]!.payload_id;
}

function claimed(payloadId: number): ClaimedPayload {
  return {
    payloadId,
    webhookId: 'crm',
    series: 1,
    attemptNo: 1,
    seriesStartedAt: new Date(),
    body: '[]',
    standby: false,
  };
}

/** Starts and ends one attempt's span on a session of its own: the links it got, and the events rows the read took. */
async function attemptLinks(payloadId: number): Promise<{ links: string[]; kinds: unknown[]; read: number }> {
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  try {
    await session.query('select pg_stat_force_next_flush()');
    await session.query('begin');
    // The span reads with a pool's query(); a session answers it the same way, and its counts are its own.
    const attempt = startAttemptSpan(session as unknown as pg.Pool, claimed(payloadId));
    await attempt.linked;
    const read = await rowsReadInTransaction(session, 'asset_webhooks.events');
    await session.query('commit');
    endAttemptSpan(attempt, null);
    // The span ends once its links are in: after the read, which is done.
    await attempt.linked;
    const [span] = exporter.getFinishedSpans();
    return {
      links: span!.links.map((link) => `00-${link.context.traceId}-${link.context.spanId}-01`),
      kinds: span!.links.map((link) => link.attributes?.['asset_webhooks.link']),
      read,
    };
  } finally {
    await session.end();
  }
}

it("links to every captured context of the payload's events and collapsed edits, and to its run, reading only those events", async () => {
  const payloadId = await seed(20_000, 3, 2);
  const { links, kinds, read } = await attemptLinks(payloadId);
  expect(new Set(links)).toEqual(
    new Set([...Array.from({ length: 9 }, (_, n) => context(n)), `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`]),
  );
  expect(kinds.filter((kind) => kind === 'coalescing run')).toHaveLength(1);
  // Three events and six collapsed edits, each through a partial index of traced events: nowhere near the 20,000 others.
  expect(read).toBeGreaterThanOrEqual(9);
  expect(read).toBeLessThan(40);
});

it('links to at most MAX_CAPTURED_LINKS captured contexts, however many the payload carries', async () => {
  const payloadId = await seed(0, MAX_CAPTURED_LINKS + 10, 0);
  const { links, kinds } = await attemptLinks(payloadId);
  expect(kinds.filter((kind) => kind === 'capture')).toHaveLength(MAX_CAPTURED_LINKS);
  expect(new Set(links).size).toBe(MAX_CAPTURED_LINKS + 1);
});

it("reads no event of a payload whose changes carried no context, only its run's", async () => {
  const payloadId = await seed(20_000, 100, 1, false);
  const { kinds, read } = await attemptLinks(payloadId);
  expect(kinds).toEqual(['coalescing run']);
  // Its 100 events and 100 collapsed edits are in neither partial index: nothing of events is read.
  expect(read).toBe(0);
});
