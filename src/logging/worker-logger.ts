import { Logger as WorkerLogger } from 'graphile-worker';
import type { Level, Logger } from 'pino';
import { describeError, isConnectionError } from '../db/connect.js';

/**
 * graphile-worker's log lines through pino, tagged `component: graphile-worker`:
 * its info is our debug (it logs every job at info), its debug our trace, and
 * its error our error, except a lost database connection (workerLineLevel).
 */
export function workerLogger(logger: Logger): WorkerLogger {
  const child = logger.child({ component: 'graphile-worker' });
  return new WorkerLogger(() => (level, message, meta) => {
    child[workerLineLevel(level, meta)](describeErrors(meta), message);
  });
}

/**
 * graphile-worker logs at error when the database goes away and it carries on
 * by itself: its notify listener's session ended or a reconnection refused
 * ("Error with notify listener"), the UNLISTEN it then tries on that session,
 * a failed reset of locked jobs or cron run that it tries again later, a job
 * that failed because its connection was lost (retried, or the next tick or
 * minute schedules another). Each passes the error as `meta.error`, which is
 * what this reads, never the message. Those lines are warnings, so that a
 * database restart or failover pages nobody. A worker that cannot go on (it
 * could not record a job's outcome) passes its error as `fatalError`, and that
 * line stays an error, as does every other; should graphile-worker stop
 * altogether, the service logs at error that the worker stopped (startService).
 */
export function workerLineLevel(level: string, meta: Readonly<Record<string, unknown>> | undefined): Level {
  switch (level) {
    case 'error':
      return isConnectionError(meta?.error) ? 'warn' : 'error';
    case 'warning':
      return 'warn';
    case 'info':
      return 'debug';
    default:
      return 'trace';
  }
}

/**
 * The line's fields, with the errors graphile-worker passes (`error`,
 * `fatalError`) as their messages: pino writes a plain Error object that is
 * not under `err` as `{}`, which would lose what went wrong.
 */
function describeErrors(meta: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> {
  const fields: Record<string, unknown> = { ...meta };
  for (const key of ['error', 'fatalError'])
    if (fields[key] !== undefined && fields[key] !== null) fields[key] = describeError(fields[key]);
  return fields;
}
