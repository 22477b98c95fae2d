import type { Logger } from 'pino';
import { loadConfigFileOffThread } from '../config/load-off-thread.js';
import { configWarnings } from '../config/warnings.js';
import { describeError } from '../db/connect.js';
import { UserError } from '../errors.js';
import type { ServiceMetrics } from './metrics.js';
import { ServiceState } from './service-state.js';

/**
 * Reads the document for a reload, off the event loop that answers the probes
 * and runs deliveries. An invalid document is logged field by field, counted,
 * and answered with null: the caller keeps the configuration in use.
 */
export async function readReloadedState(
  configPath: string,
  metrics: ServiceMetrics,
  logger: Logger,
): Promise<ServiceState | null> {
  let next: ServiceState;
  try {
    next = new ServiceState(await loadConfigFileOffThread(configPath));
  } catch (error) {
    metrics.recordReload(false);
    const problems = error instanceof UserError ? error.problems : [describeError(error)];
    for (const problem of problems) logger.error({ problem }, 'configuration not reloaded');
    logger.error('invalid configuration: keeping the one in use');
    return null;
  }
  metrics.recordReload(true);
  for (const warning of configWarnings(next.config)) logger.warn({ warning }, 'configuration');
  return next;
}

/**
 * Runs tasks one at a time, in the order asked: a reload read earlier must
 * never replace one read later (a SIGHUP and --watch-config, or signals in a
 * row), and reading a document can take seconds.
 */
export function inTurn<T>(): (task: () => Promise<T>) => Promise<T> {
  let turn: Promise<unknown> = Promise.resolve();
  return (task) => {
    const next = turn.then(task);
    turn = next.catch(() => undefined);
    return next;
  };
}
