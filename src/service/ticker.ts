import type { Logger } from 'pino';
import type pg from 'pg';
import { databaseNowMs, tick, tickPeriodMs } from '../coalesce/schedule.js';
import { describeError } from '../db/connect.js';

export interface TickerOptions {
  readonly pool: pg.Pool;
  readonly logger: Logger;
  /** The interval of the configuration in use, read at every tick. */
  readonly intervalSeconds: () => number;
  /** Coalescing starts at the first interval boundary after this moment, by the database's clock. */
  readonly notBefore: { value: number };
  /** Called before each tick: records the configuration again when an earlier recording failed. */
  readonly beforeTick: () => Promise<void>;
  readonly signal: AbortSignal;
}

/**
 * Schedules coalescing runs. Each tick reads the interval the current
 * configuration has, so a reload that changes intervalSeconds takes effect at
 * the new interval's next boundary (coalescing starts at the first boundary
 * after start). Scheduling is exactly-once across processes (tick() in SQL).
 */
export function startTicker(options: TickerOptions): { stop(): void } {
  const { pool, logger } = options;
  let timer: NodeJS.Timeout | undefined;
  let tickedInterval = options.intervalSeconds();
  // One warning when scheduling starts failing (the database is away), one line when it works again.
  let failedTicks = 0;
  const schedule = (): void => {
    timer = setTimeout(() => {
      void (async () => {
        await options.beforeTick();
        const intervalSeconds = options.intervalSeconds();
        if (intervalSeconds !== tickedInterval) {
          options.notBefore.value = await databaseNowMs(pool);
          tickedInterval = intervalSeconds;
        }
        await tick(pool, intervalSeconds, options.notBefore.value);
        if (failedTicks > 0) logger.info({ failedChecks: failedTicks }, 'coalescing runs are scheduled again');
        failedTicks = 0;
      })()
        .catch((error: unknown) => {
          if (failedTicks === 0)
            logger.warn({ err: describeError(error) }, 'could not schedule a coalescing run; trying again');
          failedTicks += 1;
        })
        .finally(() => {
          if (!options.signal.aborted) schedule();
        });
    }, tickPeriodMs(options.intervalSeconds()));
  };
  schedule();
  return { stop: () => clearTimeout(timer) };
}
