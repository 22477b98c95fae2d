import { run, type Runner, type TaskList } from 'graphile-worker';
import type { Logger } from 'pino';
import { createPool, describeError } from '../db/connect.js';
import { workerLogger } from '../logging/worker-logger.js';
import { MAINTENANCE_CRONTAB } from './crontab.js';
import type { Started } from './started.js';

export interface RunningWorker {
  /** False once graphile-worker has stopped, asked to or not. */
  running(): boolean;
  /**
   * Resolves when the worker stops: with null after a stop this process asked
   * for, with the cause when graphile-worker stopped by itself.
   */
  readonly stopped: Promise<Error | null>;
  /** Stops it (once; `started` stops it too), letting the jobs under way finish. */
  stop(): Promise<void>;
}

/**
 * Starts graphile-worker with the coalescing and maintenance tasks and
 * registers its stop with `started`. The worker gets a pool of ours, so a stop
 * can wait until its last connection is closed (its own pool may still be
 * closing when it resolves).
 */
export async function startWorker(options: {
  readonly databaseUrl: string;
  readonly concurrency: number;
  /** The worker pool's connections (connectionBudget's `worker`). */
  readonly maxPoolSize: number;
  readonly taskList: TaskList;
  readonly logger: Logger;
  readonly started: Started;
}): Promise<RunningWorker> {
  const { logger, started } = options;
  const workerPool = createPool(options.databaseUrl, {
    max: options.maxPoolSize,
    applicationName: 'asset-webhooks worker',
  });
  started.add(() => workerPool.end());
  const runner = await run({
    pgPool: workerPool,
    concurrency: options.concurrency,
    noHandleSignals: true,
    pollInterval: 1000,
    taskList: options.taskList,
    crontab: MAINTENANCE_CRONTAB,
    logger: workerLogger(logger),
  });
  let stopAsked = false;
  const end = watchEnd(runner, logger, () => stopAsked);
  const stopped = end.stopped;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      stopAsked = true;
      await runner.stop().catch(() => {});
      await stopped;
    })());
  started.add(stop);
  return { running: end.running, stopped, stop };
}

/**
 * How the runner ends. graphile-worker's runner resolves its promise even
 * when it stopped for a fatal error of its own (a job it could not complete
 * or fail, a worker that died): a stop this process did not ask for is a
 * failure, and its cause is the first fatal error graphile-worker reported.
 */
function watchEnd(
  runner: Runner,
  logger: Logger,
  stopAsked: () => boolean,
): { readonly running: () => boolean; readonly stopped: Promise<Error | null> } {
  let running = true;
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
      running = false;
      if (stopAsked()) return null;
      const cause =
        fatal === undefined
          ? new Error('graphile-worker stopped without being asked to (its log lines before this one say why)')
          : new Error(`graphile-worker stopped with an error: ${describeError(fatal)}`);
      logger.error({ err: cause.message }, 'the worker that runs coalescing stopped by itself');
      return cause;
    });
  return { running: () => running, stopped };
}
