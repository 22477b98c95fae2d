import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { configWarnings } from '../config/warnings.js';
import { databaseNowMs } from '../coalesce/schedule.js';
import { IN_TRASH_COLUMN } from '../db/asset-state.js';
import { assertReachable, createPool, describeError } from '../db/connect.js';
import { readInstallationId } from '../db/installation.js';
import { DeliveryPump } from '../delivery/pump.js';
import { processGoneGrace } from '../delivery/recover.js';
import { assertBinding, bindingProblems, captureGaps } from '../migrate/binding-check.js';
import { assertSchemaCurrent } from '../migrate/migrate.js';
import { queueAndLogReconciles, SERVICE_REQUESTER_PREFIX, switchedOnAtStart } from '../mirror/auto-reconcile.js';
import { connectionBudget } from './connection-budget.js';
import { closeHttpServer, portUnavailable, startHttpServer } from './http-server.js';
import { ServiceMetrics } from './metrics.js';
import { holdProcessLease, runApplicationName, type ProcessLease } from './process-lease.js';
import type { ServiceOptions } from './service-options.js';
import { deliveryContext, forgetConfiguration, processRecorder, ServiceState, syncWebhooks } from './service-state.js';
import { Started } from './started.js';
import { describeMove, watchSchema, type SchemaFound, type SchemaWatch } from './schema-watch.js';
import { serviceTasks } from './tasks.js';
import { startTicker } from './ticker.js';
import { startWorker, type RunningWorker } from './worker.js';

/**
 * What one `run` process has started, each step a method that startService
 * calls in order, and what they share. Each step registers how to release
 * what it started with `started`, which releases in reverse order.
 */
export class ServiceProcess {
  readonly started = new Started();
  readonly logger: Logger;
  /** The configuration in use, replaced whole by a reload. */
  state: ServiceState;
  /**
   * Every attempt this process starts records its id, and its lease tells
   * crash recovery whether the process still lives (asset_webhooks.process_gone).
   */
  readonly processId = randomUUID();
  readonly budget: ReturnType<typeof connectionBudget>;
  readonly pool: ReturnType<typeof createPool>;
  /** Coalescing starts at the first interval boundary after this moment, by the database's clock. */
  readonly notBefore = { value: 0 };
  readonly shutdown = new AbortController();
  installationId = '';
  heldLease: ProcessLease | undefined;
  /** Who records the configuration (syncWebhooks): set with the lease. */
  recorder: Parameters<typeof syncWebhooks>[2] | undefined;
  metrics: ServiceMetrics | undefined;
  httpServer: Server | undefined;
  pump: DeliveryPump | undefined;
  /** Set once graphile-worker has started; the probes answer before that. */
  worker: RunningWorker | undefined;
  ticker: { stop(): void } | undefined;
  /** Started after the ticker; a failed claim before that has nothing to ask. */
  schemaWatch: SchemaWatch | undefined;
  /** Set when the schema has moved past this release (supersede): what was found, for the log and /readyz. */
  superseded: string | undefined;
  superseding: Promise<void> | undefined;
  /** The last recording of the configuration failed: the ticker tries again before each tick. */
  unrecorded = false;

  /** Before any connection: the state refuses a secrets provider whose SDK is not installed. */
  constructor(
    readonly options: ServiceOptions,
    config: Config,
  ) {
    this.logger = options.logger;
    this.state = new ServiceState(config);
    // The state in use when the process stops: a reload closes the one it replaces.
    this.started.add(() => this.state.close());
    this.budget = connectionBudget({ poolSize: options.databasePoolSize, concurrency: options.concurrency });
    const pool = createPool(options.databaseUrl, {
      max: this.budget.pool,
      applicationName: runApplicationName(this.processId),
    });
    this.pool = pool;
    this.started.add(() => pool.end());
  }

  /** The database: reachable, at this code's schema, with a binding; what it lacks is logged. */
  async checkDatabase(): Promise<void> {
    const { pool, logger } = this;
    await assertReachable(pool, this.options.databaseUrl);
    await assertSchemaCurrent(pool);
    await assertBinding(pool);
    this.installationId = await readInstallationId(pool);
    for (const warning of configWarnings(this.state.config)) logger.warn({ warning }, 'configuration');
    for (const gap of await captureGaps(pool)) logger.warn({ gap }, 'capture: changes can go uncaptured');
    for (const problem of await bindingProblems(pool, [IN_TRASH_COLUMN]))
      logger.warn(
        { problem },
        'binding: backfill is refused, and only the capture tells a change in the Trash, until the view has this column',
      );
  }

  /**
   * The process lease, held from before this process records its
   * configuration (syncWebhooks) until stop() ends: another process takes a
   * recorded configuration whose lease is free for that of a process gone,
   * and dead-letters what only it had (asset_webhooks.record_configuration).
   * Crash recovery in other processes leaves this process's attempts alone
   * while it is held. Released after the pump has stopped (release runs in
   * reverse order): every attempt of this process has its result by then,
   * or never will.
   */
  async holdLease(): Promise<void> {
    const { pool, processId, logger } = this;
    const heldLease = await holdProcessLease(this.options.databaseUrl, processId, logger);
    this.heldLease = heldLease;
    this.started.add(() => heldLease.release());
    this.recorder = processRecorder(processId, logger, () => this.state.settings.requestTimeoutSeconds);
    // Released before the lease and after the ticker, the worker and reloads
    // that record it have stopped: a clean stop is no free lease to wait out.
    this.started.add(() =>
      forgetConfiguration(pool, processId).catch((error: unknown) => {
        logger.warn(
          { err: describeError(error) },
          'could not delete the configuration this process recorded; other processes take it for gone once its lease has been free for the grace',
        );
      }),
    );
  }

  /** The configured webhooks recorded, and the moment coalescing may start after. */
  async recordConfiguration(): Promise<void> {
    await syncWebhooks(this.pool, this.state.config, this.recorder!);
    this.notBefore.value = await databaseNowMs(this.pool);
    // Values read from the database change at most once per coalescing run.
    const metrics = new ServiceMetrics(this.pool, () => this.state.settings.intervalSeconds * 1000);
    metrics.knowWebhooks(this.state.settings.webhooks);
    this.metrics = metrics;
  }

  /** The HTTP server, when asked for: a port that cannot be had is refused before any work starts. */
  async serveHttp(): Promise<void> {
    const { httpPort, httpHost } = this.options;
    if (httpPort === undefined) return;
    const metrics = this.metrics!;
    let server: Server;
    try {
      server = await startHttpServer(
        httpPort,
        {
          pool: this.pool,
          workerRunning: () => this.worker?.running() ?? false,
          configLoaded: () => true,
          secondsSinceLocalFault: () => metrics.secondsSinceLocalFault(),
          coalescingSchedule: () => ({
            intervalSeconds: this.state.settings.intervalSeconds,
            sinceMs: this.notBefore.value,
          }),
          superseded: () => this.superseded ?? null,
        },
        metrics,
        httpHost,
        this.logger,
      );
    } catch (error) {
      throw portUnavailable(httpPort, httpHost, error);
    }
    this.httpServer = server;
    this.started.add(() => closeHttpServer(server));
  }

  /** The delivery pump, built before the worker (whose tasks wake it) and started after. */
  createPump(): void {
    const { pool, installationId, logger, shutdown } = this;
    const metrics = this.metrics!;
    const delivery = deliveryContext(pool, installationId, () => this.state, logger, metrics, shutdown.signal);
    const pump = new DeliveryPump(delivery, {
      databaseUrl: this.options.databaseUrl,
      goneGraceSeconds: () => processGoneGrace(pool, this.processId, this.state.settings.requestTimeoutSeconds),
      claimFailed: () => this.schemaWatch?.check(),
      schemaChanged: () => this.schemaWatch?.check(),
    });
    metrics.trackRequestsInFlight(() => pump.requestsInFlight);
    metrics.trackInterval(() => this.state.settings.intervalSeconds);
    this.pump = pump;
  }

  /** graphile-worker with the coalesce and maintenance tasks. */
  async startJobs(): Promise<void> {
    const pump = this.pump!;
    this.worker = await startWorker({
      databaseUrl: this.options.databaseUrl,
      concurrency: this.budget.worker - 2,
      maxPoolSize: this.budget.worker,
      taskList: serviceTasks({
        pool: this.pool,
        logger: this.logger,
        metrics: this.metrics!,
        state: () => this.state,
        recorder: this.recorder!,
        payloadsWritten: () => pump.wake(),
        processName: `${SERVICE_REQUESTER_PREFIX}${this.processId}`,
      }),
      logger: this.logger,
      started: this.started,
    });
  }

  /**
   * A webhook this document makes a mirror one that the service last routed
   * as plain (set while no process ran, or in a restart) gets its set seeded
   * from its delivery history and reconciled, as a reload would queue it
   * (docs/mirror.md). Before the ticker, so no run routes by this document first.
   */
  async queueSwitchedOnMirrors(): Promise<void> {
    const switched = await switchedOnAtStart(this.pool, this.state.settings.webhooks);
    await queueAndLogReconciles(this.pool, switched, this.logger);
  }

  /** The pump, in this process outside graphile-worker: requests in flight never hold the job slots coalescing runs in. */
  startDelivery(): void {
    const pump = this.pump!;
    pump.start();
    this.started.add(() => pump.stop());
  }

  /** The ticker that schedules coalescing runs, recording the configuration again first when that failed. */
  startTicker(): void {
    const ticker = startTicker({
      pool: this.pool,
      logger: this.logger,
      intervalSeconds: () => this.state.settings.intervalSeconds,
      notBefore: this.notBefore,
      beforeTick: async () => {
        if (this.unrecorded) await this.recordWebhooks();
      },
      signal: this.shutdown.signal,
    });
    this.ticker = ticker;
    this.started.add(() => ticker.stop());
  }

  /** Last to start, first to stop: a move of the schema seen while stopping changes nothing. */
  watchSchema(): void {
    const watch = watchSchema({
      pool: this.pool,
      onMoved: (found) => {
        this.superseding ??= this.supersede(found).catch((error: unknown) => {
          this.logger.error({ err: describeError(error) }, 'could not stop claiming and coalescing; stop this process');
        });
      },
    });
    this.schemaWatch = watch;
    this.started.add(() => watch.stop());
  }

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
  private async supersede(found: SchemaFound): Promise<void> {
    if (this.shutdown.signal.aborted) return;
    this.superseded = describeMove(found);
    this.logger.warn({ ...found }, this.superseded);
    this.ticker?.stop();
    await this.worker?.stop();
    await this.pump?.stop();
    this.logger.info(
      { processId: this.processId },
      'stopped claiming and coalescing; deliveries in flight have ended: waiting for SIGTERM',
    );
  }

  /** Records the configuration in use again, unless stopping or superseded; a failure is retried before the next tick. */
  async recordWebhooks(): Promise<void> {
    // A stopping process deletes its recorded configuration (forgetConfiguration): never write it again.
    if (this.shutdown.signal.aborted) return;
    // Nor one whose schema moved on: its configuration is no longer in use.
    if (this.superseded !== undefined) return;
    try {
      await syncWebhooks(this.pool, this.state.config, this.recorder!);
      if (this.unrecorded) this.logger.info('the configuration in use is recorded in the database again');
      this.unrecorded = false;
    } catch (error) {
      if (!this.unrecorded)
        this.logger.warn(
          { err: describeError(error) },
          'could not record the configuration in the database; trying again',
        );
      this.unrecorded = true;
    }
  }
}
