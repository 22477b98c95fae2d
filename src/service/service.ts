import { loadConfigFile } from '../config/load.js';
import { describeError } from '../db/connect.js';
import { changedMirrors, queueAndLogReconciles } from '../mirror/auto-reconcile.js';
import { inTurn, readReloadedState } from './reload.js';
import type { RunningService, ServiceOptions } from './service-options.js';
import { ServiceProcess } from './service-process.js';
import { startTracingStep } from './tracing-step.js';

export type { RunningService, ServiceOptions } from './service-options.js';

/**
 * The `run` command, in order:
 *   0. tracing, when the OTEL_ variables ask for it (tracing-step.ts);
 *   1. the configuration, a pool, and the database checks (reachable, schema,
 *      binding);
 *   2. the process lease (before this process records its configuration and
 *      before any attempt can start), then the configured webhooks recorded;
 *   3. the HTTP server (a port that cannot be had is refused before any work
 *      starts);
 *   4. graphile-worker with the coalesce and maintenance tasks, and the
 *      reconcile of a webhook this document switches to mirror queued;
 *   5. the delivery pump, in this process outside graphile-worker, so that
 *      requests in flight never hold the job slots coalescing runs in;
 *   6. the ticker that schedules coalescing runs;
 *   7. the watch on the schema, which a newer release's migrate may move.
 * Several processes may share one database: coalescing is scheduled once per
 * interval (tick(), exactly-once in SQL) and serialised by a session lock (src/db/session-lock.ts);
 * delivery claims are safe across processes (asset_webhooks.claim_payloads).
 * stop() and a failed start release what was started in reverse order.
 */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const service = new ServiceProcess(options, await loadConfigFile(options.configPath));
  try {
    await startTracingStep(process.env, service.logger, service.started);
    await service.checkDatabase();
    await service.holdLease();
    await service.recordConfiguration();
    await service.serveHttp();
    service.createPump();
    await service.startJobs();
    await service.queueSwitchedOnMirrors();
    service.startDelivery();
    service.startTicker();
    service.watchSchema();
  } catch (error) {
    await service.started.releaseAll().catch(() => {});
    throw error;
  }
  logRunning(service);
  return runningService(service);
}

/** The line that says the service runs, with what it runs with. */
function logRunning(service: ServiceProcess): void {
  const { state, options } = service;
  service.logger.info(
    {
      processId: service.processId,
      webhooks: state.routed.length,
      enabled: state.routed.filter((webhook) => webhook.enabled).length,
      intervalSeconds: state.settings.intervalSeconds,
      maxRequestsInFlight: state.settings.maxRequestsInFlight,
      httpPort: options.httpPort,
      httpHost: options.httpHost,
      heapGrowingPercent: options.heapGrowingPercent,
      databaseConnections: service.budget,
    },
    'asset-webhooks running',
  );
}

/** The handle on a started service: its stop, its reloads, and how it ended. */
function runningService(service: ServiceProcess): RunningService {
  const { logger } = service;
  let stopping: Promise<void> | undefined;
  let stopAsked: () => void = () => {};
  const untilStopAsked = new Promise<null>((resolve) => (stopAsked = () => resolve(null)));
  // One reload at a time. The turn ends once the document is in use; recording
  // it in the database (which waits while the database is away) is not part of it.
  const reloadInTurn = inTurn<boolean>();
  return {
    // A worker stopped because the schema moved is no failure: the process waits to be stopped.
    stopped: service.worker!.stopped.then(
      (failure) => failure ?? (service.superseded !== undefined ? untilStopAsked : null),
    ),
    httpServer: service.httpServer,
    stop() {
      stopping ??= (async () => {
        logger.info('stopping: finishing in-flight deliveries and jobs');
        service.shutdown.abort();
        stopAsked();
        await service.superseding;
        await service.started.releaseAll();
        logger.info('stopped');
      })();
      return stopping;
    },
    async reload() {
      const applied = await reloadInTurn(() => reloadNow(service));
      if (applied) {
        await service.recordWebhooks();
        service.pump!.wake();
      }
      return applied;
    },
  };
}

/** Reads the document again and puts it in use; a mirror webhook whose checks changed gets a reconcile queued. */
async function reloadNow(service: ServiceProcess): Promise<boolean> {
  const { logger, pool } = service;
  const metrics = service.metrics!;
  const next = await readReloadedState(service.options.configPath, metrics, logger);
  if (next === null) return false;
  const previous = service.state;
  service.state = next;
  metrics.knowWebhooks(next.settings.webhooks);
  void previous.close().catch(() => {});
  const changed = changedMirrors(previous.settings.webhooks, next.settings.webhooks);
  if (changed.length > 0) {
    // Queued by every process that reloads; one job per webhook runs (see queueReconciles).
    queueAndLogReconciles(pool, changed, logger).catch((error: unknown) =>
      logger.error(
        { webhooks: changed.map((mirror) => mirror.webhookId), err: describeError(error) },
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
