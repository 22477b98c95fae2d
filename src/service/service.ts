import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { run, type Runner, type TaskList } from 'graphile-worker';
import type { Logger } from 'pino';
import { loadConfigFile } from '../config/load.js';
import { loadConfigFileOffThread } from '../config/load-off-thread.js';
import { configWarnings } from '../config/warnings.js';
import { coalesce } from '../coalesce/run.js';
import { databaseNowMs, recordTickOutcome, tick, tickPeriodMs } from '../coalesce/schedule.js';
import { IN_TRASH_COLUMN } from '../db/asset-state.js';
import { assertReachable, createPool, describeError } from '../db/connect.js';
import { readInstallationId } from '../db/installation.js';
import { DeliveryPump } from '../delivery/pump.js';
import { processGoneGrace } from '../delivery/recover.js';
import { UserError } from '../errors.js';
import { workerLogger } from '../logging/worker-logger.js';
import { runMaintenance } from '../maintenance/maintenance.js';
import { assertBinding, bindingProblems, captureGaps } from '../migrate/binding-check.js';
import { assertSchemaCurrent } from '../migrate/migrate.js';
import { MAINTENANCE_CRONTAB } from './crontab.js';
import { closeHttpServer, startHttpServer } from './http-server.js';
import { holdProcessLease, runApplicationName, type ProcessLease } from './process-lease.js';
import { ServiceMetrics } from './metrics.js';
import { deliveryContext, forgetConfiguration, ServiceState, syncWebhooks } from './service-state.js';

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
  /** V8's heap growth as `run` set it (see limitHeapGrowth), told in the line that says the service runs. */
  readonly heapGrowingPercent?: number | null | undefined;
  /** The clock delivery's rules read (claims, retry times, expiry, recovery). Default: the system clock. */
  readonly clock?: () => Date;
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

/** What startService has started, released in reverse order by one function. */
class Started {
  private readonly releases: Array<() => Promise<void> | void> = [];

  /** Registers how to release what was just started. */
  add(release: () => Promise<void> | void): void {
    this.releases.push(release);
  }

  /** Releases everything, last started first; every release runs even when one fails. */
  async releaseAll(): Promise<void> {
    let failure: unknown;
    for (const release of this.releases.splice(0).reverse()) {
      try {
        await release();
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }
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
 * interval (tick(), exactly-once in SQL) and serialised by an advisory lock;
 * delivery claims are safe across processes (asset_webhooks.claim_payloads).
 * stop() and a failed start release what was started in reverse order.
 */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { logger } = options;
  const clock = options.clock ?? (() => new Date());
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
  const pool = createPool(options.databaseUrl, { max: 12, applicationName: runApplicationName(processId) });
  started.add(() => pool.end());
  // Coalescing starts at the first interval boundary after this moment, by the database's clock.
  let notBefore: number;
  let installationId: string;
  try {
    await assertReachable(pool, options.databaseUrl);
    await assertSchemaCurrent(pool);
    await assertBinding(pool);
    installationId = await readInstallationId(pool);
    for (const warning of configWarnings(config)) logger.warn({ warning }, 'configuration');
    for (const gap of await captureGaps(pool)) logger.warn({ gap }, 'capture: changes can go uncaptured');
    for (const problem of await bindingProblems(pool, [IN_TRASH_COLUMN]))
      logger.warn({ problem }, 'binding: backfill is refused until the view has this column');
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
    notBefore = await databaseNowMs(pool);
  } catch (error) {
    return failedStart(error);
  }
  // Values read from the database change at most once per coalescing run.
  const metrics = new ServiceMetrics(pool, () => state.settings.intervalSeconds * 1000);
  const shutdown = new AbortController();
  const delivery = deliveryContext(pool, installationId, () => state, logger, metrics, shutdown.signal, clock);

  let workerRunning = false;
  let httpServer: Server | undefined;
  if (options.httpPort !== undefined) {
    try {
      const server = await startHttpServer(
        options.httpPort,
        {
          pool,
          workerRunning: () => workerRunning,
          configLoaded: () => true,
          secondsSinceLocalFault: () => metrics.secondsSinceLocalFault(),
          coalescingSchedule: () => ({ intervalSeconds: state.settings.intervalSeconds, sinceMs: notBefore }),
        },
        metrics,
        options.httpHost,
        logger,
      );
      httpServer = server;
      started.add(() => closeHttpServer(server));
    } catch (error) {
      return failedStart(
        new UserError(
          'http_port_unavailable',
          options.httpHost === undefined
            ? `--http-port ${options.httpPort}: expected a port this process can listen on, got ${describeError(error)}`
            : `--http-host ${JSON.stringify(options.httpHost)} --http-port ${options.httpPort}: expected an address and port this process can listen on, got ${describeError(error)}`,
        ),
      );
    }
  }

  const pump = new DeliveryPump(delivery, {
    databaseUrl: options.databaseUrl,
    ownLeaseHeldForMs: () => heldLease.heldForMs(),
  });
  metrics.trackRequestsInFlight(() => pump.requestsInFlight);
  metrics.trackInterval(() => state.settings.intervalSeconds);

  const taskList: TaskList = {
    coalesce: async (payload) => {
      // The run routes by this process's configuration, and delivery sends only
      // to webhooks the table says are enabled: the two must agree. Another
      // `run` process with a different configuration (a rolling change, a
      // SIGHUP that missed one) writes its own at start and reload, and would
      // otherwise leave webhooks routed here but never sent, or the reverse.
      // Under the coalescing lock: a run of another process cannot rewrite them while this one routes.
      const current = state;
      const beforeRun = async (): Promise<void> => {
        const restored = await syncWebhooks(pool, current.config, recorder);
        if (restored.length > 0) {
          logger.warn(
            { webhooks: restored },
            "asset_webhooks.webhooks differed from this process's configuration, as another run process with a different configuration writes it; restored before coalescing",
          );
        }
      };
      const slot = tickSlot(payload);
      try {
        const result = await coalesce({
          pool,
          webhooks: current.routed,
          maxPayloadBytes: current.settings.maxPayloadBytes,
          logger,
          beforeRun,
        });
        metrics.recordRun(result);
        pump.wake();
        if (slot !== null) await recordTickOutcome(pool, slot, null).catch(() => {});
      } catch (error) {
        if (slot !== null) await recordTickOutcome(pool, slot, describeError(error)).catch(() => {});
        throw error;
      }
    },
    maintenance: async () => {
      await runMaintenance({ pool, retentionDays: state.settings.retentionDays, logger });
    },
  };

  // graphile-worker gets a pool of ours, so stop() can wait until its last
  // connection is closed (its own pool may still be closing when it resolves).
  const concurrency = options.concurrency ?? 4;
  const workerPool = createPool(options.databaseUrl, {
    max: concurrency + 2,
    applicationName: 'asset-webhooks worker',
  });
  started.add(() => workerPool.end());
  let runner: Runner;
  try {
    runner = await run({
      pgPool: workerPool,
      concurrency,
      noHandleSignals: true,
      pollInterval: 1000,
      taskList,
      crontab: MAINTENANCE_CRONTAB,
      logger: workerLogger(logger),
    });
  } catch (error) {
    return failedStart(error);
  }
  workerRunning = true;
  // graphile-worker's runner resolves its promise even when it stopped for a
  // fatal error of its own (a job it could not complete or fail, a worker that
  // died): a stop this process did not ask for is a failure, and its cause is
  // the first fatal error graphile-worker reported.
  let stopAsked = false;
  let fatal: unknown;
  runner.events.on('pool:fatalError', ({ error }) => (fatal ??= error));
  runner.events.on('worker:fatalError', ({ error }) => (fatal ??= error));
  const stopped = runner.promise
    .then(
      () => null,
      (error: unknown) => {
        fatal ??= error;
        return null;
      },
    )
    .then(() => {
      workerRunning = false;
      if (stopAsked) return null;
      const cause =
        fatal === undefined
          ? new Error('graphile-worker stopped without being asked to (its log lines before this one say why)')
          : new Error(`graphile-worker stopped with an error: ${describeError(fatal)}`);
      logger.error({ err: cause.message }, 'the worker that runs coalescing stopped by itself');
      return cause;
    });
  started.add(async () => {
    stopAsked = true;
    await runner.stop().catch(() => {});
    await stopped;
  });

  pump.start();
  started.add(() => pump.stop());

  const ticker = startTicker();
  started.add(() => ticker.stop());

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
    },
    'asset-webhooks running',
  );

  /**
   * Schedules coalescing runs. Each tick reads the interval the current
   * configuration has, so a reload that changes intervalSeconds takes effect
   * at the new interval's next boundary (coalescing starts at the first
   * boundary after start). The webhooks of a reload are recorded in the
   * database (views, claims); if it cannot be reached the reload still
   * applies in this process, and every tick tries to record them again.
   */
  function startTicker(): { stop(): void } {
    let timer: NodeJS.Timeout | undefined;
    let tickedInterval = state.settings.intervalSeconds;
    // One warning when scheduling starts failing (the database is away), one line when it works again.
    let failedTicks = 0;
    const schedule = (): void => {
      timer = setTimeout(() => {
        void (async () => {
          if (unrecorded) await recordWebhooks();
          const intervalSeconds = state.settings.intervalSeconds;
          if (intervalSeconds !== tickedInterval) {
            notBefore = await databaseNowMs(pool);
            tickedInterval = intervalSeconds;
          }
          await tick(pool, intervalSeconds, notBefore);
          if (failedTicks > 0) logger.info({ failedChecks: failedTicks }, 'coalescing runs are scheduled again');
          failedTicks = 0;
        })()
          .catch((error: unknown) => {
            if (failedTicks === 0)
              logger.warn({ err: describeError(error) }, 'could not schedule a coalescing run; trying again');
            failedTicks += 1;
          })
          .finally(() => {
            if (!shutdown.signal.aborted) schedule();
          });
      }, tickPeriodMs(state.settings.intervalSeconds));
    };
    schedule();
    return { stop: () => clearTimeout(timer) };
  }

  let unrecorded = false;
  async function recordWebhooks(): Promise<void> {
    // A stopping process deletes its recorded configuration (forgetConfiguration): never write it again.
    if (shutdown.signal.aborted) return;
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
   * Reloads one at a time, in the order asked (a SIGHUP and --watch-config, or
   * signals in a row): a document is checked in a worker, which can take
   * seconds, and one read earlier must never replace one read later. The
   * turn ends once the document is in use; recording it in the database
   * (which waits while the database is away) is not part of it.
   */
  let reloadTurn: Promise<unknown> = Promise.resolve();
  async function reloadNow(): Promise<boolean> {
    let next: ServiceState;
    try {
      // Off the event loop that answers the probes and runs deliveries.
      next = new ServiceState(await loadConfigFileOffThread(options.configPath));
    } catch (error) {
      metrics.recordReload(false);
      const problems = error instanceof UserError ? error.problems : [describeError(error)];
      for (const problem of problems) logger.error({ problem }, 'configuration not reloaded');
      logger.error('invalid configuration: keeping the one in use');
      return false;
    }
    metrics.recordReload(true);
    for (const warning of configWarnings(next.config)) logger.warn({ warning }, 'configuration');
    const previous = state;
    state = next;
    void previous.close().catch(() => {});
    logger.info(
      { webhooks: next.routed.length, intervalSeconds: next.settings.intervalSeconds },
      'configuration reloaded',
    );
    return true;
  }

  let stopping: Promise<void> | undefined;
  return {
    stopped,
    httpServer,
    stop() {
      stopping ??= (async () => {
        logger.info('stopping: finishing in-flight deliveries and jobs');
        shutdown.abort();
        await started.releaseAll();
        logger.info('stopped');
      })();
      return stopping;
    },
    async reload() {
      const turn = reloadTurn.then(reloadNow);
      reloadTurn = turn.catch(() => undefined);
      const applied = await turn;
      if (applied) {
        await recordWebhooks();
        pump.wake();
      }
      return applied;
    },
  };
}

/** The slot of a coalesce job's payload (see tick()), or null for a job added otherwise. */
function tickSlot(payload: unknown): number | null {
  const slot = (payload as { slot?: unknown } | null)?.slot;
  return typeof slot === 'number' && Number.isInteger(slot) ? slot : null;
}
