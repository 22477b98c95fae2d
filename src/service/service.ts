import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { loadConfigFile } from '../config/load.js';
import { configWarnings } from '../config/warnings.js';
import { databaseNowMs } from '../coalesce/schedule.js';
import { IN_TRASH_COLUMN } from '../db/asset-state.js';
import { assertReachable, createPool, describeError } from '../db/connect.js';
import { readInstallationId } from '../db/installation.js';
import { DeliveryPump } from '../delivery/pump.js';
import { processGoneGrace } from '../delivery/recover.js';
import { assertBinding, bindingProblems, captureGaps } from '../migrate/binding-check.js';
import { assertSchemaCurrent } from '../migrate/migrate.js';
import { connectionBudget } from './connection-budget.js';
import { closeHttpServer, portUnavailable, startHttpServer } from './http-server.js';
import { holdProcessLease, runApplicationName, type ProcessLease } from './process-lease.js';
import { ServiceMetrics } from './metrics.js';
import { deliveryContext, forgetConfiguration, ServiceState, syncWebhooks } from './service-state.js';
import { inTurn, readReloadedState } from './reload.js';
import { changedMirrors, queueReconciles, SERVICE_REQUESTER_PREFIX } from '../mirror/auto-reconcile.js';
import { Started } from './started.js';
import { serviceTasks } from './tasks.js';
import { describeMove, watchSchema, type SchemaFound, type SchemaWatch } from './schema-watch.js';
import { startTicker } from './ticker.js';
import { startWorker, type RunningWorker } from './worker.js';

export interface ServiceOptions {
  readonly databaseUrl: string;
  readonly configPath: string;
  readonly logger: Logger;
  /** Serve /livez, /readyz, /healthz and /metrics on this port. */
  readonly httpPort?: number | undefined;
  /** The address the HTTP server listens on. Default: every interface. */
  readonly httpHost?: string | undefined;
  /** graphile-worker jobs (coalescing runs, maintenance) this process runs at once. Default 4. */
  readonly concurrency?: number | undefined;
  /** Connections of the process's own pool (see connectionBudget). Default 12. */
  readonly databasePoolSize?: number | undefined;
  /** V8's heap growth as `run` set it (see limitHeapGrowth), told in the line that says the service runs. */
  readonly heapGrowingPercent?: number | null | undefined;
}

export interface RunningService {
  /** Stop taking work, let in-flight deliveries and jobs finish, release everything. */
  stop(): Promise<void>;
  /** Reload the configuration; an invalid document keeps the old one. Returns whether it was applied. */
  reload(): Promise<boolean>;
  /**
   * Resolves when the worker stops: with null after stop(), with the cause
   * when graphile-worker stopped by itself (a fatal error of its own).
   */
  readonly stopped: Promise<Error | null>;
  readonly httpServer: Server | undefined;
}

/**
 * The `run` command, in order:
 *   1. the configuration, a pool, and the database checks (reachable, schema,
 *      binding);
 *   2. the process lease (before this process records its configuration and
 *      before any attempt can start), then the configured webhooks recorded;
 *   3. the HTTP server (a port that cannot be had is refused before any work
 *      starts);
 *   4. graphile-worker with the coalesce and maintenance tasks;
 *   5. the delivery pump, in this process outside graphile-worker, so that
 *      requests in flight never hold the job slots coalescing runs in;
 *   6. the ticker that schedules coalescing runs.
 * Several processes may share one database: coalescing is scheduled once per
 * interval (tick(), exactly-once in SQL) and serialised by a session lock (src/db/session-lock.ts);
 * delivery claims are safe across processes (asset_webhooks.claim_payloads).
 * stop() and a failed start release what was started in reverse order.
 */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { logger } = options;
  const config = await loadConfigFile(options.configPath);
  const started = new Started();
  const failedStart = async (error: unknown): Promise<never> => {
    await started.releaseAll().catch(() => {});
    throw error;
  };

  // Before any connection: it refuses a secrets provider whose SDK is not installed.
  let state = new ServiceState(config);
  started.add(() => state.close());
  // Every attempt this process starts records its id, and its lease tells
  // crash recovery whether the process still lives (asset_webhooks.process_gone).
  const processId = randomUUID();
  const budget = connectionBudget({ poolSize: options.databasePoolSize, concurrency: options.concurrency });
  const pool = createPool(options.databaseUrl, { max: budget.pool, applicationName: runApplicationName(processId) });
  started.add(() => pool.end());
  // Coalescing starts at the first interval boundary after this moment, by the database's clock.
  const notBefore = { value: 0 };
  let installationId: string;
  try {
    await assertReachable(pool, options.databaseUrl);
    await assertSchemaCurrent(pool);
    await assertBinding(pool);
    installationId = await readInstallationId(pool);
    for (const warning of configWarnings(config)) logger.warn({ warning }, 'configuration');
    for (const gap of await captureGaps(pool)) logger.warn({ gap }, 'capture: changes can go uncaptured');
    for (const problem of await bindingProblems(pool, [IN_TRASH_COLUMN]))
      logger.warn(
        { problem },
        'binding: backfill is refused, and only the capture tells a change in the Trash, until the view has this column',
      );
  } catch (error) {
    return failedStart(error);
  }
  // Held from before this process records its configuration (syncWebhooks)
  // until stop() ends: another process takes a recorded configuration whose
  // lease is free for that of a process gone, and dead-letters what only it
  // had (asset_webhooks.record_configuration). Crash recovery in other
  // processes leaves this process's attempts alone while it is held. Released
  // after the pump has stopped (release runs in reverse order): every attempt
  // of this process has its result by then, or never will.
  let heldLease: ProcessLease;
  try {
    heldLease = await holdProcessLease(options.databaseUrl, processId, logger);
  } catch (error) {
    return failedStart(error);
  }
  started.add(() => heldLease.release());
  // Released before the lease and after the ticker, the worker and reloads
  // that record it have stopped: a clean stop is no free lease to wait out.
  started.add(() =>
    forgetConfiguration(pool, processId).catch((error: unknown) => {
      logger.warn(
        { err: describeError(error) },
        'could not delete the configuration this process recorded; other processes take it for gone once its lease has been free for the grace',
      );
    }),
  );
  // The process itself is the recorder: crash recovery's grace, read at each recording.
  const recorder = {
    processId,
    logger,
    get goneGraceSeconds() {
      return processGoneGrace(heldLease.heldForMs(), state.settings.requestTimeoutSeconds);
    },
  };
  try {
    await syncWebhooks(pool, state.config, recorder);
    notBefore.value = await databaseNowMs(pool);
  } catch (error) {
    return failedStart(error);
  }
  // Values read from the database change at most once per coalescing run.
  const metrics = new ServiceMetrics(pool, () => state.settings.intervalSeconds * 1000);
  metrics.knowWebhooks(state.settings.webhooks);
  const shutdown = new AbortController();
  const delivery = deliveryContext(pool, installationId, () => state, logger, metrics, shutdown.signal);

  let httpServer: Server | undefined;
  // Set once graphile-worker has started; the probes answer before that.
  let worker: RunningWorker | undefined;
  // Set when the schema has moved past this release (supersede): what was found, for the log and /readyz.
  let superseded: string | undefined;
  let superseding: Promise<void> | undefined;
  // Started after the ticker; a failed claim before that has nothing to ask.
  let schemaWatch: SchemaWatch | undefined;
  if (options.httpPort !== undefined) {
    try {
      const server = await startHttpServer(
        options.httpPort,
        {
          pool,
          workerRunning: () => worker?.running() ?? false,
          configLoaded: () => true,
          secondsSinceLocalFault: () => metrics.secondsSinceLocalFault(),
          coalescingSchedule: () => ({ intervalSeconds: state.settings.intervalSeconds, sinceMs: notBefore.value }),
          superseded: () => superseded ?? null,
        },
        metrics,
        options.httpHost,
        logger,
      );
      httpServer = server;
      started.add(() => closeHttpServer(server));
    } catch (error) {
      return failedStart(portUnavailable(options.httpPort, options.httpHost, error));
    }
  }

  const pump = new DeliveryPump(delivery, {
    databaseUrl: options.databaseUrl,
    ownLeaseHeldForMs: () => heldLease.heldForMs(),
    claimFailed: () => schemaWatch?.check(),
    schemaChanged: () => schemaWatch?.check(),
  });
  metrics.trackRequestsInFlight(() => pump.requestsInFlight);
  metrics.trackInterval(() => state.settings.intervalSeconds);

  let running: RunningWorker;
  try {
    running = await startWorker({
      databaseUrl: options.databaseUrl,
      concurrency: budget.worker - 2,
      maxPoolSize: budget.worker,
      taskList: serviceTasks({
        pool,
        logger,
        metrics,
        state: () => state,
        recorder,
        payloadsWritten: () => pump.wake(),
        processName: `${SERVICE_REQUESTER_PREFIX}${processId}`,
      }),
      logger,
      started,
    });
  } catch (error) {
    return failedStart(error);
  }
  worker = running;

  pump.start();
  started.add(() => pump.stop());

  const ticker = startTicker({
    pool,
    logger,
    intervalSeconds: () => state.settings.intervalSeconds,
    notBefore,
    beforeTick: async () => {
      if (unrecorded) await recordWebhooks();
    },
    signal: shutdown.signal,
  });
  started.add(() => ticker.stop());

  // Last to start, first to stop: a move seen while stopping changes nothing.
  const watch = watchSchema({
    pool,
    onMoved: (found) => {
      superseding ??= supersede(found).catch((error: unknown) => {
        logger.error({ err: describeError(error) }, 'could not stop claiming and coalescing; stop this process');
      });
    },
  });
  schemaWatch = watch;
  started.add(() => watch.stop());

  logger.info(
    {
      processId,
      webhooks: state.routed.length,
      enabled: state.routed.filter((webhook) => webhook.enabled).length,
      intervalSeconds: state.settings.intervalSeconds,
      maxRequestsInFlight: state.settings.maxRequestsInFlight,
      httpPort: options.httpPort,
      httpHost: options.httpHost,
      heapGrowingPercent: options.heapGrowingPercent,
      databaseConnections: budget,
    },
    'asset-webhooks running',
  );

  /**
   * Another release's `migrate` has moved the schema past this process: it
   * calls neither the functions nor the tables of a schema it was not
   * written for once it knows. It stops claiming and coalescing (the
   * ticker, graphile-worker, the pump), lets the deliveries in flight end
   * (a settle that the new functions refuse leaves its attempt to crash
   * recovery, which the new release's processes run once this one's lease
   * is released at SIGTERM), and stays up unready, so that the kubelet does
   * not restart it into a refused start, until it is told to stop.
   */
  async function supersede(found: SchemaFound): Promise<void> {
    if (shutdown.signal.aborted) return;
    superseded = describeMove(found);
    logger.warn({ ...found }, superseded);
    ticker.stop();
    await running.stop();
    await pump.stop();
    logger.info({ processId }, 'stopped claiming and coalescing; deliveries in flight have ended: waiting for SIGTERM');
  }

  let unrecorded = false;
  async function recordWebhooks(): Promise<void> {
    // A stopping process deletes its recorded configuration (forgetConfiguration): never write it again.
    if (shutdown.signal.aborted) return;
    // Nor one whose schema moved on: its configuration is no longer in use.
    if (superseded !== undefined) return;
    try {
      await syncWebhooks(pool, state.config, recorder);
      if (unrecorded) logger.info('the configuration in use is recorded in the database again');
      unrecorded = false;
    } catch (error) {
      if (!unrecorded)
        logger.warn({ err: describeError(error) }, 'could not record the configuration in the database; trying again');
      unrecorded = true;
    }
  }

  /**
   * One reload at a time. The turn ends once the document is in use; recording
   * it in the database (which waits while the database is away) is not part of it.
   */
  const reloadInTurn = inTurn<boolean>();
  async function reloadNow(): Promise<boolean> {
    const next = await readReloadedState(options.configPath, metrics, logger);
    if (next === null) return false;
    const previous = state;
    state = next;
    metrics.knowWebhooks(next.settings.webhooks);
    void previous.close().catch(() => {});
    const changed = changedMirrors(previous.settings.webhooks, next.settings.webhooks);
    if (changed.length > 0) {
      // Queued by every process that reloads; one job per webhook runs (see queueReconciles).
      queueReconciles(pool, changed).then(
        () => logger.info({ webhooks: changed }, "reconcile queued: a mirror webhook's filters changed"),
        (error: unknown) =>
          logger.error(
            { webhooks: changed, err: describeError(error) },
            'could not queue the reconcile of changed mirror webhooks; run asset-webhooks reconcile --webhook ID',
          ),
      );
    }
    logger.info(
      { webhooks: next.routed.length, intervalSeconds: next.settings.intervalSeconds },
      'configuration reloaded',
    );
    return true;
  }

  let stopping: Promise<void> | undefined;
  let stopAsked: () => void = () => {};
  const untilStopAsked = new Promise<null>((resolve) => (stopAsked = () => resolve(null)));
  return {
    // A worker stopped because the schema moved is no failure: the process waits to be stopped.
    stopped: running.stopped.then((failure) => failure ?? (superseded !== undefined ? untilStopAsked : null)),
    httpServer,
    stop() {
      stopping ??= (async () => {
        logger.info('stopping: finishing in-flight deliveries and jobs');
        shutdown.abort();
        stopAsked();
        await superseding;
        await started.releaseAll();
        logger.info('stopped');
      })();
      return stopping;
    },
    async reload() {
      const applied = await reloadInTurn(reloadNow);
      if (applied) {
        await recordWebhooks();
        pump.wake();
      }
      return applied;
    },
  };
}
