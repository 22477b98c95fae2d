import type pg from 'pg';
import type { Logger } from 'pino';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { inTransaction } from '../db/transaction.js';
import type { Statement } from '../db/columns.js';
import { isoTimestamp } from '../payloads/serialize.js';
import { PayloadIdBlock } from '../payloads/ids.js';
import { sealOpenPayloads } from '../payloads/seal.js';
import { writePayloads } from '../payloads/store.js';
import { releaseCoalesceLock, takeCoalesceLock } from './coalesce-lock.js';
import { claimChunk, viewHasInTrash, type Chunk } from './claim.js';
import { outboxHighWater, recordRunStart } from './run-start.js';
import { AssetClock, lastEventTimestamp, stampChunk } from './clock.js';
import { Packer } from '../payloads/pack.js';
import { chunkStatements } from './persist.js';
import { RoutingIndex } from '../filters/routing-index.js';
import { routeChunk, type Route, type Routing } from './route.js';
import type { RoutedWebhook } from './routed-webhooks.js';
import { recordRouting } from '../payloads/routing.js';
import { SeenValues } from './seen.js';
import { MirrorRouting } from '../mirror/route.js';

export interface CoalesceOptions {
  readonly pool: pg.Pool;
  /**
   * Every configured webhook, enabled or not (disabled ones record `disabled`);
   * a function is asked once the run holds the coalescing lock, so that a
   * reload before then is routed by (a reconcile queued by that reload
   * then comes after this run: see src/mirror/auto-reconcile.ts).
   */
  readonly webhooks: readonly RoutedWebhook[] | (() => readonly RoutedWebhook[]);
  readonly maxPayloadBytes: number;
  /**
   * Outbox rows per chunk transaction; memory is bounded by it (three chunks
   * are in memory at once: one written, one routed, one read). Default 2000:
   * a larger chunk raises a drain's peak memory without making it faster,
   * and a smaller one spreads each chunk's fixed cost (a claim and a write,
   * a round trip each) over fewer rows (measured in bench/README.md).
   */
  readonly chunkSize?: number;
  readonly logger: Logger;
  /** The clock (payload timestamps). Default: the system clock. */
  readonly now?: () => Date;
  /**
   * Runs once this run holds the coalescing lock, before it reads anything:
   * the service records its webhooks there, so no other process's run can
   * rewrite them while this one routes.
   */
  readonly beforeRun?: () => Promise<void>;
}

export interface CoalesceResult {
  /** null when another run held the lock and this one did nothing. */
  readonly runId: number | null;
  readonly events: number;
  readonly payloads: number;
  readonly chunks: number;
  /** Outbox rows read but left for the next run (see claimChunk). */
  readonly deferred: number;
  /** Outcome counts across all webhooks, by route (`deliver` = carried in a payload). */
  readonly routes: Partial<Record<Route, number>>;
}

/**
 * One coalescing run: takes every outbox row committed up to now, in chunks of
 * one transaction each (claim, collapse, route, pack, persist, consume), so a
 * crash leaves each chunk either wholly done or wholly untouched. Payloads are
 * full except the last one per webhook per run; that one is continued across
 * chunks as an `open` payload and sealed at the end.
 */
export async function coalesce(options: CoalesceOptions): Promise<CoalesceResult> {
  const { pool, logger } = options;
  const chunkSize = options.chunkSize ?? 2000;
  const now = options.now ?? (() => new Date());
  const lockClient = await pool.connect();
  // Set when the lock could not be freed: the session may still hold it, so
  // it is closed, which frees it, rather than returned to the pool.
  let unreleased: Error | undefined;
  try {
    if (!(await takeCoalesceLock(lockClient))) {
      logger.info('another coalescing run is in progress; this one does nothing');
      return { runId: null, events: 0, payloads: 0, chunks: 0, deferred: 0, routes: {} };
    }
    try {
      await options.beforeRun?.();
      return await runLocked(options, chunkSize, now, lockClient);
    } finally {
      await releaseCoalesceLock(lockClient).catch((error: unknown) => {
        unreleased = error instanceof Error ? error : new Error(String(error));
        throw error;
      });
    }
  } finally {
    lockClient.release(unreleased);
  }
}

/** `session` holds the run's coalescing lock; every chunk is read on it (see recordRunStart). */
async function runLocked(
  options: CoalesceOptions,
  chunkSize: number,
  now: () => Date,
  session: pg.PoolClient,
): Promise<CoalesceResult> {
  const { pool } = options;
  const webhooks = typeof options.webhooks === 'function' ? options.webhooks() : options.webhooks;
  // A previous run that crashed may have left open payloads: their events are
  // those that name them (written in the same transactions), so seal them.
  const sealed = await sealOpenPayloads(pool, () => isoTimestamp(now()));
  if (sealed.length > 0) await announcePayloadsReady(pool);

  // The high-water mark, every asset's latest edit up to it and the seqs not
  // yet committed below it come from one snapshot, held only for these reads.
  // Each chunk then reads in its own snapshot (claimChunk leaves to the next
  // run what this one's start did not see), so a run holds no snapshot for
  // long: a snapshot held for the whole run would keep every dead row of the
  // database from being pruned meanwhile, the asset tables' and delivery's.
  const start = await inTransaction(
    session,
    async (client) => {
      const high = await outboxHighWater(client);
      return high === null
        ? null
        : { maxSeq: high, ids: await recordRunStart(client, high), lastStampMs: await lastEventTimestamp(client) };
    },
    'repeatable read',
  );
  const {
    rows: [run],
  } = await pool.query<{ run_id: number }>('insert into asset_webhooks.coalesce_runs default values returning run_id');
  const runId = run!.run_id;
  const logger = options.logger.child({ runId });
  const packers = webhooks.map(
    (webhook) => new Packer(webhook.id, { batchSize: webhook.batchSize, maxPayloadBytes: options.maxPayloadBytes }),
  );
  const routing: Routing = {
    routingId: await recordRouting(pool, webhooks),
    index: new RoutingIndex(webhooks),
    seen: new SeenValues(webhooks),
    packers,
    mirror: MirrorRouting.of(webhooks),
  };
  const routes: Partial<Record<Route, number>> = {};
  const payloadIds = new Set<number>();
  let events = 0;
  let chunks = 0;
  let deferred = 0;

  if (start !== null) {
    const { maxSeq, ids } = start;
    // Three stages run at once, each on a chunk of its own: the session reads
    // chunk N+2, this process routes chunk N+1 and builds its statements, and
    // `writer` writes chunk N in its own transaction. Chunks are written one
    // after the other, in order; a chunk's statements are built before any
    // later chunk is routed, so they write the batches as that chunk left them.
    const writer = await pool.connect();
    // A chunk lost to a server crash after commit is lost whole, outbox
    // deletions included, and coalesced again by the next run with the same
    // eventIds: waiting for the WAL flush buys nothing here. Set for the
    // session, so that a chunk of one statement needs no other.
    await writer.query('set synchronous_commit = off');
    const payloadIdBlock = new PayloadIdBlock(session);
    const clock = new AssetClock(start.lastStampMs);
    const done: Promise<Chunk | null> = Promise.resolve(null);
    const reads = { ...routing.seen.reads, inTrash: await viewHasInTrash(session) };
    const mirrored = routing.mirror !== null;
    const claim = (afterSeq: number): Promise<Chunk> =>
      claimChunk(session, ids, maxSeq, afterSeq, chunkSize, { reads, mirror: mirrored, probeUpToMs: clock.watermark });
    let next: Promise<Chunk | null> = claim(0);
    let writing: Promise<void> = Promise.resolve();
    let failed = false;
    try {
      for (;;) {
        const chunk = await next;
        if (chunk === null || chunk.read === 0) break;
        next = chunk.read < chunkSize ? done : claim(chunk.lastSeq);
        // If a write fails, this read is abandoned; its own failure is not the run's.
        next.catch(() => {});
        deferred += chunk.deferred;
        if (chunk.events.length === 0) continue;
        // Before routing: every webhook gets the same, possibly raised, eventTimestamp.
        const { rows, raised } = stampChunk(chunk.events, clock);
        // Read with the chunk, before the two chunks before it were written: see MirrorMembers.absorb.
        routing.mirror?.members.absorb(rows.map((row) => ({ assetId: row.assetId, row: row.membership })));
        const routed = routeChunk(rows, routing, routes);
        const batches = packers.flatMap((packer) => packer.drain());
        await payloadIdBlock.assign(batches);
        const statements = chunkStatements(
          runId,
          routing.routingId,
          {
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
          },
          batches,
          routing.mirror?.members.takeChanges() ?? [],
          isoTimestamp(now()),
        );
        const sealed = batches.some((batch) => batch.sealed);
        const written = batches.map((batch) => batch.payloadId!);
        await writing;
        writing = writeChunk(writer, statements, sealed).then(() => {
          for (const id of written) payloadIds.add(id);
          events += rows.length;
          chunks += 1;
          logger.debug({ events: rows.length }, 'coalesced a chunk');
        });
        // Awaited before the next chunk is written or the run ends; a failure is the run's then.
        writing.catch(() => {});
      }
      await writing;
      await writer.query('reset synchronous_commit');
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      await Promise.allSettled([next, writing]);
      // After a failure the connection may be in any state: close it rather than reuse it.
      writer.release(failed);
    }
  }

  // Seal the last payload of each webhook.
  const lastSealed = await inTransaction(session, async (client) => {
    for (const packer of packers) packer.finish();
    const batches = packers.flatMap((packer) => packer.drain());
    await writePayloads(client, runId, batches, isoTimestamp(now()));
    // `events` was counted chunk by chunk, each in its own transaction.
    await client.query(
      'update asset_webhooks.coalesce_runs set finished_at = clock_timestamp(), payloads = $2 where run_id = $1',
      [runId, payloadIds.size],
    );
    return batches.length > 0;
  });
  if (lastSealed) await announcePayloadsReady(session);
  if (deferred > 0)
    logger.info(
      { deferred },
      'events that committed while the run went on, and later events of their assets, wait for the next run',
    );
  if (events > 0) logger.info({ events, payloads: payloadIds.size, chunks }, 'coalescing run done');
  return { runId, events, payloads: payloadIds.size, chunks, deferred, routes };
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
