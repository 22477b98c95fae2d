import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { UserError } from '../errors.js';
import { readConfigBytes } from './load.js';

/** How often `run --watch-config` reads the configuration file. */
export const WATCH_INTERVAL_MS = 1000;

export interface ConfigWatcher {
  /** Stops polling; a change callback already running is not interrupted. */
  close(): void;
}

/**
 * Calls `onChange` after what the configuration file's path holds changes
 * (`run --watch-config`).
 *
 * The file is read through its path every `intervalMs` and its SHA-256
 * compared with the last one seen. Reading through the path, rather than
 * watching it, follows every way a file is replaced: a write in place, an
 * editor's rename over it, and the atomic symlink swap of a Kubernetes
 * ConfigMap volume (`config.yaml -> ..data/config.yaml`, where `..data` is
 * renamed to point at a new directory), which inotify on the file alone never
 * reports because the file it watches is not changed, only abandoned. Polling
 * also works where file events are missing (network and overlay file
 * systems).
 *
 * - Only a regular file of at most the document size limit is read, through
 *   readConfigBytes: a device, a FIFO, a directory or a huge file at the path
 *   is never read, so a poll never waits on it, nor holds a thread of libuv's
 *   pool, nor reads gigabytes a second.
 * - A path that cannot be used (missing, unreadable, not a regular file, too
 *   large) is a state of its own: entering it is a change, so the reload
 *   says why the file is refused, keeps the configuration in use and records
 *   it (the service's metrics); leaving it is a change too, even back to the
 *   bytes seen before, so the reload records that the file is usable again.
 *   The reason is logged once per state, not every poll.
 * - The first read, made before this resolves, is the baseline: starting the
 *   watcher reloads nothing, and any change after it resolves is seen.
 * - A change seen while `onChange` runs is compared after it returns, so
 *   reloads never overlap and the last bytes written are always the ones
 *   loaded last.
 * - Half-written bytes are reloaded like any others: the reload refuses them
 *   and keeps the configuration in use, and the completed file differs again.
 * - A poll that finds the path as it was logs so at debug level: the log shows
 *   the path is still read, and when, though nothing changes.
 */
export async function watchConfigFile(
  path: string,
  onChange: () => unknown,
  logger: Logger,
  intervalMs: number = WATCH_INTERVAL_MS,
): Promise<ConfigWatcher> {
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

  /**
   * The state of the path: `bytes:` and the digest of a usable file, or
   * `unusable:` and why not. A file system error is keyed by its code, not its
   * message: a file that vanishes between the stat and the open of one poll is
   * the same state (ENOENT) as at the next poll's stat, not a second change.
   */
  const observe = async (): Promise<{ state: string; problem?: string }> => {
    try {
      return {
        state: `bytes:${createHash('sha256')
          .update(await readConfigBytes(path))
          .digest('hex')}`,
      };
    } catch (error) {
      const problem = error instanceof UserError ? error.problems.join('; ') : String(error);
      const cause: unknown = error instanceof Error ? error.cause : undefined;
      const code =
        cause !== null && typeof cause === 'object' && typeof (cause as { code?: unknown }).code === 'string'
          ? (cause as { code: string }).code
          : undefined;
      return { state: `unusable:${code ?? problem}`, problem };
    }
  };

  const first = await observe();
  let last = first.state;
  if (first.problem !== undefined) {
    logger.warn({ path, problem: first.problem }, 'configuration file unusable');
  }

  const poll = async (): Promise<void> => {
    const { state: current, problem } = await observe();
    if (closed) return;
    if (current === last) {
      logger.debug({ path }, 'configuration file unchanged');
      return;
    }
    last = current;
    if (problem !== undefined) {
      logger.warn(
        { path, problem },
        'configuration file unusable: reloading to record it; the configuration in use stays',
      );
    } else {
      logger.info({ path }, 'configuration file changed: reloading');
    }
    try {
      await onChange();
    } catch (error) {
      logger.error({ err: error }, 'configuration reload failed');
    }
  };

  const schedule = (): void => {
    if (closed) return;
    timer = setTimeout(() => void poll().finally(schedule), intervalMs);
    // Never keeps the process alive on its own: `run` ends when the service stops.
    timer.unref();
  };
  schedule();

  return {
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
