import type pg from 'pg';
import type { Logger } from 'pino';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { inTransaction } from '../db/transaction.js';
import type { Statement } from '../db/columns.js';
import type { ConsumedEvents } from '../payloads/events.js';
import { PayloadIdBlock } from '../payloads/ids.js';
import { isoTimestamp } from '../payloads/serialize.js';
import { claimChunk, viewHasInTrash, type Chunk, type ClaimedEvent } from './claim.js';
import { AssetClock, stampChunk } from './clock.js';
import type { EventIds } from './event-ids.js';
import { chunkStatements } from './persist.js';
import { routeChunk, type Route, type Routing } from './route.js';

/** A run under way: what it routes by, and what it has done so far. */
export interface Run {
  readonly pool: pg.Pool;
  readonly runId: number;
  readonly logger: Logger;
  readonly routing: Routing;
  readonly now: () => Date;
  readonly routes: Partial<Record<Route, number>>;
  readonly payloadIds: Set<number>;
  events: number;
  chunks: number;
  deferred: number;
}

/** What the run's start read (see run.ts). */
export interface RunStart {
  readonly maxSeq: number;
  readonly ids: EventIds;
  readonly lastStampMs: number | null;
}

/**
 * Coalesces the outbox up to the start's high-water mark, chunk by chunk.
 * Three stages run at once, each on a chunk of its own: the session reads
 * chunk N+2, this process routes chunk N+1 and builds its statements, and
 * `writer` writes chunk N in its own transaction. Chunks are written one
 * after the other, in order; a chunk's statements are built before any
 * later chunk is routed, so they write the batches as that chunk left them.
 */
export async function coalesceChunks(
  run: Run,
  start: RunStart,
  session: pg.PoolClient,
  chunkSize: number,
): Promise<void> {
  const writer = await run.pool.connect();
  let failed = false;
  try {
    // A chunk lost to a server crash after commit is lost whole, outbox
    // deletions included, and coalesced again by the next run with the same
    // eventIds: waiting for the WAL flush buys nothing here. Set for the
    // session, so that a chunk of one statement needs no other.
    await writer.query('set synchronous_commit = off');
    await pipeChunks(run, start, session, writer, chunkSize);
    await writer.query('reset synchronous_commit');
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // After a failure the connection may be in any state: close it rather than reuse it.
    writer.release(failed);
  }
}

/** The three stages of coalesceChunks: reads on `session`, routing here, writes on `writer`. */
async function pipeChunks(
  run: Run,
  start: RunStart,
  session: pg.PoolClient,
  writer: pg.PoolClient,
  chunkSize: number,
): Promise<void> {
  const { maxSeq, ids } = start;
  const payloadIdBlock = new PayloadIdBlock(session);
  const clock = new AssetClock(start.lastStampMs);
  const reads = { ...run.routing.seen.reads, inTrash: await viewHasInTrash(session) };
  const features = run.routing.features.map((feature) => feature.read);
  const claim = (afterSeq: number): Promise<Chunk> =>
    claimChunk(session, ids, maxSeq, afterSeq, chunkSize, { reads, features, probeUpToMs: clock.watermark });
  const done: Promise<Chunk | null> = Promise.resolve(null);
  let next: Promise<Chunk | null> = claim(0);
  let writing: Promise<void> = Promise.resolve();
  try {
    for (;;) {
      const chunk = await next;
      if (chunk === null || chunk.read === 0) break;
      next = chunk.read < chunkSize ? done : claim(chunk.lastSeq);
      // If a write fails, this read is abandoned; its own failure is not the run's.
      next.catch(() => {});
      run.deferred += chunk.deferred;
      if (chunk.events.length === 0) continue;
      const routed = await routeAndPack(run, chunk.events, clock, payloadIdBlock);
      await writing;
      writing = writeChunk(writer, routed.statements, routed.sealed).then(() => {
        for (const id of routed.written) run.payloadIds.add(id);
        run.events += chunk.events.length;
        run.chunks += 1;
        run.logger.debug({ events: chunk.events.length }, 'coalesced a chunk');
      });
      // Awaited before the next chunk is written or the run ends; a failure is the run's then.
      writing.catch(() => {});
    }
    await writing;
  } finally {
    await Promise.allSettled([next, writing]);
  }
}

/** One chunk's routing: stamps, routes and packs its events, and builds the statements that write it. */
async function routeAndPack(
  run: Run,
  events: readonly ClaimedEvent[],
  clock: AssetClock,
  payloadIdBlock: PayloadIdBlock,
): Promise<{ statements: Statement[]; sealed: boolean; written: number[] }> {
  const { routing } = run;
  // Read with the chunk, before the two chunks before it were written: see RoutingFeature.absorb.
  for (const feature of routing.features) feature.absorb(events);
  // Before routing: every webhook gets the same, possibly raised, eventTimestamp.
  const { rows, raised } = stampChunk(events, clock, routing.features);
  const routed = routeChunk(rows, routing, run.routes);
  const batches = routing.packers.flatMap((packer) => packer.drain());
  await payloadIdBlock.assign(batches);
  const consumed: ConsumedEvents = {
    seqs: rows.map((row) => row.seq),
    eventIds: rows.map((row) => row.eventId),
    atomIds: routed.atomIds,
    // Only where the outbox has none: the events row takes the outbox's otherwise.
    assetUuids: rows.map((row) => (row.assetUuidCaptured ? null : row.assetUuid)),
    collapsedInto: routed.collapsed,
    seen: routed.routes.map((route) => route.seen),
    deliveredTo: routed.routes.map((route) => route.positions),
    // The batches have their payload ids by now.
    payloadIds: routed.routes.map((route) => route.batches.map((batch) => batch.payloadId!)),
    unmatchedTo: routed.routes.map((route) => route.unmatched),
    inTrash: rows.map((row) => row.inTrash && row.asset !== null),
    raisedTimestamps: raised,
  };
  const webhookTimestamp = isoTimestamp(run.now());
  return {
    statements: chunkStatements(run.runId, routing.routingId, consumed, batches, routing.features, webhookTimestamp),
    sealed: batches.some((batch) => batch.sealed),
    written: batches.map((batch) => batch.payloadId!),
  };
}

/**
 * Runs one chunk's statements in one transaction (a single statement is its
 * own), then, if it sealed payloads, wakes the delivery pumps of every process
 * so that they are sent without waiting for a poll. One statement is
 * also one round trip: the writer then waits for nothing this process does
 * meanwhile, such as routing the next chunk.
 */
async function writeChunk(writer: pg.PoolClient, statements: readonly Statement[], sealed: boolean): Promise<void> {
  const [only] = statements;
  if (statements.length === 1) await writer.query(only!.text, only!.values);
  else
    await inTransaction(writer, async (client) => {
      for (const statement of statements) await client.query(statement.text, statement.values);
    });
  if (sealed) await announcePayloadsReady(writer);
}
