import type pg from 'pg';
import type { Logger } from 'pino';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { inTransaction } from '../db/transaction.js';
import { RoutingIndex } from '../filters/routing-index.js';
import { Packer } from '../payloads/pack.js';
import { recordRouting } from '../payloads/routing.js';
import { sealOpenPayloads } from '../payloads/seal.js';
import { isoTimestamp } from '../payloads/serialize.js';
import { writePayloads } from '../payloads/store.js';
import { coalesceChunks, type Run, type RunStart } from './chunks.js';
import { lastEventTimestamp } from './clock.js';
import { releaseCoalesceLock, takeCoalesceLock } from './coalesce-lock.js';
import { inRunSpan } from './run-span.js';
import { traceparentOf } from '../tracing/trace-context.js';
import type { Route, Routing } from './route.js';
import type { RoutedWebhook } from './routed-webhooks.js';
import type { RoutingFeature, RoutingFeatureKind } from './routing-feature.js';
import { outboxHighWater, recordRunStart } from './run-start.js';
import { SeenValues } from './seen.js';

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
  /**
   * The routing features that are on (the mirror webhooks': see
   * src/service/routing-features.ts). Default none: every webhook then gets
   * exactly the events its checks pass.
   */
  readonly features?: readonly RoutingFeatureKind[];
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

/**
 * `session` holds the run's coalescing lock; every chunk is read on it (see
 * recordRunStart). A run that finds outbox rows runs in a span (inRunSpan),
 * whose context is recorded with the run; an idle one, every interval, in
 * none.
 */
async function runLocked(
  options: CoalesceOptions,
  chunkSize: number,
  now: () => Date,
  session: pg.PoolClient,
): Promise<CoalesceResult> {
  const webhooks = typeof options.webhooks === 'function' ? options.webhooks() : options.webhooks;
  await sealLeftOpen(options.pool, now);
  const start = await readRunStart(session);
  if (start === null) return finishRun(await beginRun(options, webhooks, now, null), session);
  return inRunSpan(async (span) => {
    const run = await beginRun(options, webhooks, now, traceparentOf(span));
    await coalesceChunks(run, start, session, chunkSize);
    return finishRun(run, session);
  });
}

/** Seals the run's last payloads, records its end and says what it did. */
async function finishRun(run: Run, session: pg.PoolClient): Promise<CoalesceResult> {
  await sealLastPayloads(run, session);
  const { runId, events, payloadIds, chunks, deferred, routes, logger } = run;
  if (deferred > 0)
    logger.info(
      { deferred },
      'events that committed while the run went on, and later events of their assets, wait for the next run',
    );
  if (events > 0) logger.info({ events, payloads: payloadIds.size, chunks }, 'coalescing run done');
  return { runId, events, payloads: payloadIds.size, chunks, deferred, routes };
}

/**
 * A previous run that crashed may have left open payloads: their events are
 * those that name them (written in the same transactions), so they are sealed.
 */
async function sealLeftOpen(pool: pg.Pool, now: () => Date): Promise<void> {
  const sealed = await sealOpenPayloads(pool, () => isoTimestamp(now()));
  if (sealed.length > 0) await announcePayloadsReady(pool);
}

/**
 * The high-water mark, every asset's latest edit up to it and the seqs not
 * yet committed below it come from one snapshot, held only for these reads.
 * Each chunk then reads in its own snapshot (claimChunk leaves to the next
 * run what this one's start did not see), so a run holds no snapshot for
 * long: a snapshot held for the whole run would keep every dead row of the
 * database from being pruned meanwhile, the asset tables' and delivery's.
 * null when the outbox is empty.
 */
async function readRunStart(session: pg.PoolClient): Promise<RunStart | null> {
  return inTransaction(
    session,
    async (client) => {
      const high = await outboxHighWater(client);
      return high === null
        ? null
        : { maxSeq: high, ids: await recordRunStart(client, high), lastStampMs: await lastEventTimestamp(client) };
    },
    'repeatable read',
  );
}

/** Records the run and the configuration it routes by, and gives each webhook its packer and each feature its part. */
async function beginRun(
  options: CoalesceOptions,
  webhooks: readonly RoutedWebhook[],
  now: () => Date,
  traceparent: string | null,
): Promise<Run> {
  const { pool } = options;
  const {
    rows: [row],
  } = await pool.query<{ run_id: number }>(
    'insert into asset_webhooks.coalesce_runs (traceparent) values ($1) returning run_id',
    [traceparent],
  );
  const runId = row!.run_id;
  const features = (options.features ?? []).flatMap((kind): RoutingFeature[] => {
    const feature = kind.of(webhooks);
    return feature === null ? [] : [feature];
  });
  const routing: Routing = {
    routingId: await recordRouting(pool, webhooks),
    index: new RoutingIndex(webhooks),
    seen: new SeenValues(webhooks),
    packers: webhooks.map(
      (webhook) => new Packer(webhook.id, { batchSize: webhook.batchSize, maxPayloadBytes: options.maxPayloadBytes }),
    ),
    features,
  };
  const logger = options.logger.child({ runId });
  return { pool, runId, logger, routing, now, routes: {}, payloadIds: new Set(), events: 0, chunks: 0, deferred: 0 };
}

/** Seals the last payload of each webhook and records the run's end. */
async function sealLastPayloads(run: Run, session: pg.PoolClient): Promise<void> {
  const { packers } = run.routing;
  const lastSealed = await inTransaction(session, async (client) => {
    for (const packer of packers) packer.finish();
    const batches = packers.flatMap((packer) => packer.drain());
    await writePayloads(client, run.runId, batches, isoTimestamp(run.now()));
    // `events` was counted chunk by chunk, each in its own transaction.
    await client.query(
      'update asset_webhooks.coalesce_runs set finished_at = clock_timestamp(), payloads = $2 where run_id = $1',
      [run.runId, run.payloadIds.size],
    );
    return batches.length > 0;
  });
  if (lastSealed) await announcePayloadsReady(session);
}
