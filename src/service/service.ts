import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { Logger as WorkerLogger, run, type Runner, type TaskList } from 'graphile-worker';
import type pg from 'pg';
import type { Logger } from 'pino';
import { loadConfigFile } from '../config/load.js';
import { configWarnings } from '../config/warnings.js';
import { coalesce } from '../coalesce/run.js';
import { databaseNowMs, MAINTENANCE_CRONTAB, tick, tickPeriodMs } from '../coalesce/schedule.js';
import { assertReachable, createPool, describeError } from '../db/connect.js';
import { deliverPayload, type DeliverJob } from '../delivery/deliver.js';
import { UserError } from '../errors.js';
import { processGoneGrace, runMaintenance } from '../maintenance/maintenance.js';
import { assertBinding, captureGaps } from '../migrate/binding-check.js';
import { assertSchemaCurrent } from '../migrate/migrate.js';
import { startHttpServer } from './http-server.js';
import { holdProcessLease, runApplicationName, type ProcessLease } from './process-lease.js';
import { ServiceMetrics } from './metrics.js';
import { deliveryContext, ServiceState, syncWebhooks } from './service-state.js';

export interface ServiceOptions {
  readonly databaseUrl: string;
  readonly configPath: string;
  readonly logger: Logger;
  /** Serve /healthz and /metrics on this port. */
  readonly httpPort?: number | undefined;
  /** Jobs (deliveries, coalescing runs) this process runs at once. Default 10. */
  readonly concurrency?: number | undefined;
  /** V8's heap growth as `run` set it (see limitHeapGrowth), told in the line that says the service runs. */
  readonly heapGrowingPercent?: number | null | undefined;
}

export interface RunningService {
  /** Stop taking work, let in-flight jobs finish, release everything. */
  stop(): Promise<void>;
  /** Reload the configuration; an invalid document keeps the old one. Returns whether it was applied. */
  reload(): Promise<boolean>;
  /** Resolves when the worker stops (after stop(), or on a fatal error). */
  readonly stopped: Promise<void>;
  readonly httpServer: Server | undefined;
}

/**
 * The `run` command: a graphile-worker runner with the coalesce, deliver and
 * maintenance tasks. Several processes may share one database: coalescing is
 * scheduled once per interval (tick(), exactly-once in SQL) and
 * serialised by a queue and an advisory lock; deliveries are jobs.
 */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { logger } = options;
  const config = await loadConfigFile(options.configPath);
  // Every attempt this process starts records its id, and its lease tells
  // maintenance whether the process still lives (asset_webhooks.process_gone).
  const processId = randomUUID();
  const pool = createPool(options.databaseUrl, { max: (options.concurrency ?? 10) + 4, applicationName: runApplicationName(processId) });
  try {
    await assertReachable(pool, options.databaseUrl);
    await assertSchemaCurrent(pool);
    await assertBinding(pool);
  } catch (error) {
    await pool.end();
    throw error;
  }

  for (const warning of configWarnings(config)) logger.warn({ warning }, 'configuration');
  for (const gap of await captureGaps(pool)) logger.warn({ gap }, 'capture: changes can go uncaptured');
  let state = new ServiceState(config);
  // Held from before this process records its configuration (syncWebhooks)
  // until stop() ends: another process takes a configuration whose lease is
  // free for that of a process gone, whose webhooks may be removed.
  const lease: ProcessLease = await holdProcessLease(options.databaseUrl, processId, logger);
  try {
    await syncWebhooks(pool, state.config, { processId, logger });
  } catch (error) {
    await lease.release();
    await pool.end();
    throw error;
  }
  // Coalescing starts at the first interval boundary after this moment.
  let notBefore = await databaseNowMs(pool);
  const metrics = new ServiceMetrics(pool);
  const shutdown = new AbortController();
  const context = deliveryContext(pool, () => state, logger, metrics, shutdown.signal);

  const taskList: TaskList = {
    coalesce: async () => {
      // The run routes by this process's configuration, and delivery sends only
      // to webhooks the table says are enabled: the two must agree. Another
      // `run` process with a different configuration (a rolling change, a
      // SIGHUP that missed one) writes its own at start and reload, and would
      // otherwise leave webhooks routed here but never sent, or the reverse.
      // Under the coalescing lock: a run of another process cannot rewrite them while this one routes.
      // Every enabled webhook is pumped as well, once an interval: a net for a
      // wake-up lost between a delivery's settle and a transaction that added
      // payloads (see dispatchCommitted in coalesce/run.ts).
      const current = state;
      const beforeRun = async (): Promise<void> => {
        const restored = await syncWebhooks(pool, current.config, { processId, logger });
        if (restored.length > 0) {
          logger.warn({ webhooks: restored },
            'asset_webhooks.webhooks differed from this process\'s configuration, as another run process with a different configuration writes it; restored before coalescing');
        }
      };
      const result = await coalesce({ pool, webhooks: current.routed, maxPayloadBytes: current.settings.maxPayloadBytes, logger, beforeRun });
      metrics.recordRun(result);
    },
    deliver: async (payload) => {
      await deliverPayload(parseDeliverJob(payload), context);
    },
    maintenance: async () => {
      await runMaintenance({
        pool,
        retentionDays: state.settings.retentionDays,
        deadLetterAfterSeconds: state.settings.retry.deadLetterAfterSeconds,
        processGoneGraceSeconds: processGoneGrace(lease?.heldForMs() ?? 0, state.settings.requestTimeoutSeconds),
        logger,
      });
    },
  };

  // Listen before any work starts: a port that cannot be had is refused like a
  // bad option, not left behind by a worker that is already running.
  let workerRunning = false;
  let httpServer: Server | undefined;
  const closeHttpServer = (): Promise<void> => new Promise((resolve) => (httpServer ? httpServer.close(() => resolve()) : resolve()));
  if (options.httpPort !== undefined) {
    try {
      httpServer = await startHttpServer(options.httpPort, { pool, workerRunning: () => workerRunning }, metrics);
    } catch (error) {
      await lease.release();
      await state.close();
      await pool.end();
      throw new UserError('http_port_unavailable', `--http-port ${options.httpPort}: expected a port this process can listen on, got ${describeError(error)}`);
    }
  }

  // graphile-worker gets a pool of ours, so stop() can wait until its last
  // connection is closed (its own pool may still be closing when it resolves).
  const workerPool = createPool(options.databaseUrl, { max: (options.concurrency ?? 10) + 2, applicationName: 'asset-webhooks worker' });
  let runner: Runner;
  try {
    runner = await run({
      pgPool: workerPool,
      concurrency: options.concurrency ?? 10,
      noHandleSignals: true,
      pollInterval: 1000,
      taskList,
      crontab: MAINTENANCE_CRONTAB,
      logger: workerLogger(logger),
    });
  } catch (error) {
    // The worker never started an attempt: the lease goes first, whatever the rest does.
    await lease?.release();
    await closeHttpServer();
    await state.close();
    await workerPool.end();
    await pool.end();
    throw error;
  }
  workerRunning = true;
  const stopped = runner.promise.then(
    () => {
      workerRunning = false;
    },
    (error: unknown) => {
      workerRunning = false;
      logger.error({ err: describeError(error) }, 'worker stopped with an error');
    },
  );

  // Each tick reads the interval the current configuration has, so a reload
  // that changes intervalSeconds takes effect at the new interval's next boundary.
  let ticker: NodeJS.Timeout | undefined;
  let tickedInterval = state.settings.intervalSeconds;
  // The webhooks of a reload are recorded in the database (views, delivery's
  // concurrency, dispatch); if it cannot be reached the reload still applies in
  // this process, and every tick tries to record them again until it works.
  let unrecorded = false;
  const recordWebhooks = async (): Promise<void> => {
    try {
      await syncWebhooks(pool, state.config, { processId, logger });
      if (unrecorded) logger.info('the configuration in use is recorded in the database again');
      unrecorded = false;
    } catch (error) {
      if (!unrecorded) logger.warn({ err: describeError(error) }, 'could not record the configuration in the database; trying again');
      unrecorded = true;
    }
  };
  // One warning when scheduling starts failing (the database is away), one line when it works again.
  let failedTicks = 0;
  const scheduleTick = (): void => {
    ticker = setTimeout(() => {
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
          if (failedTicks === 0) logger.warn({ err: describeError(error) }, 'could not schedule a coalescing run; trying again');
          failedTicks += 1;
        })
        .finally(() => {
          if (!shutdown.signal.aborted) scheduleTick();
        });
    }, tickPeriodMs(state.settings.intervalSeconds));
  };
  scheduleTick();

  logger.info({
    webhooks: state.routed.length,
    enabled: state.routed.filter((webhook) => webhook.enabled).length,
    intervalSeconds: state.settings.intervalSeconds,
    httpPort: options.httpPort,
    heapGrowingPercent: options.heapGrowingPercent,
  }, 'asset-webhooks running');

  let stopping: Promise<void> | undefined;
  return {
    stopped,
    httpServer,
    stop() {
      stopping ??= (async () => {
        logger.info('stopping: finishing in-flight jobs');
        shutdown.abort();
        clearTimeout(ticker);
        try {
          await runner.stop();
          await stopped;
          await closeHttpServer();
          await state.close();
          await workerPool.end();
          await pool.end();
        } finally {
          // Last: every attempt this process started has its result by now, or never will.
          await lease?.release();
        }
        logger.info('stopped');
      })();
      return stopping;
    },
    async reload() {
      let next: ServiceState;
      try {
        next = new ServiceState(await loadConfigFile(options.configPath));
      } catch (error) {
        const problems = error instanceof UserError ? error.problems : [describeError(error)];
        for (const problem of problems) logger.error({ problem }, 'configuration not reloaded');
        logger.error('invalid configuration: keeping the one in use');
        return false;
      }
      for (const warning of configWarnings(next.config)) logger.warn({ warning }, 'configuration');
      const previous = state;
      state = next;
      void previous.close().catch(() => {});
      logger.info({ webhooks: next.routed.length, intervalSeconds: next.settings.intervalSeconds }, 'configuration reloaded');
      await recordWebhooks();
      return true;
    },
  };
}

function parseDeliverJob(payload: unknown): DeliverJob {
  const job = payload as Partial<DeliverJob> | null;
  if (!job || !Number.isInteger(job.payloadId) || !Number.isInteger(job.series) || !Number.isInteger(job.attempt)) {
    throw new Error(`deliver job: expected {payloadId, series, attempt} integers, got ${JSON.stringify(payload)}`);
  }
  return job as DeliverJob;
}

/** graphile-worker's log lines through pino. */
function workerLogger(logger: Logger): WorkerLogger {
  const child = logger.child({ component: 'graphile-worker' });
  return new WorkerLogger(() => (level, message, meta) => {
    const method = level === 'error' ? 'error' : level === 'warning' ? 'warn' : level === 'info' ? 'debug' : 'trace';
    child[method]({ ...meta }, message);
  });
}
