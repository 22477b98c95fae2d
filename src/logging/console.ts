import { format } from 'node:util';
import type { Logger } from 'pino';

const levels = { debug: 'debug', trace: 'debug', log: 'info', info: 'info', warn: 'warn', error: 'error' } as const;

/**
 * Sends what dependencies write with `console` to the service's logger, so the
 * log stream stays one JSON object per line. graphile-worker writes to the
 * console in a few places: `console.error` while it retries completing jobs
 * with the database away, `console.trace` (a multi-line stack) when one of
 * its workers exits with an error, which it then also logs through the logger
 * we gave it, so traces go to debug. Returns a function that puts the console back.
 */
export function routeConsoleTo(logger: Logger): () => void {
  const original = new Map<keyof typeof levels, Console[keyof typeof levels]>();
  for (const [method, level] of Object.entries(levels) as Array<
    [keyof typeof levels, (typeof levels)[keyof typeof levels]]
  >) {
    original.set(method, console[method]);
    console[method] = (...args: unknown[]): void => logger[level]({ source: 'console' }, format(...args));
  }
  return () => {
    for (const [method, write] of original) console[method] = write;
  };
}
