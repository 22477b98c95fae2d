import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';

/** How often `run --watch-config` reads the configuration file. */
export const WATCH_INTERVAL_MS = 1000;

export interface ConfigWatcher {
  /** Stops polling; a change callback already running is not interrupted. */
  close(): void;
}

/**
 * Calls `onChange` after the bytes of the configuration file change (`run
 * --watch-config`).
 *
 * The file is read through its path every `intervalMs` and its SHA-256
 * compared with the last one seen. Reading through the path, rather than
 * watching it, follows every way a file is replaced: a write in place, an
 * editor's rename over it, and the atomic symlink swap of a Kubernetes
 * ConfigMap volume (`config.yaml -> ..data/config.yaml`, where `..data` is
 * renamed to point at a new directory), which inotify on the file alone never
 * reports because the file it watches is not changed, only abandoned. Polling
 * also works where file events are missing (network and overlay file
 * systems); a configuration document is small, so a read a second costs
 * nothing.
 *
 * - The first read, made before this returns, is the baseline: starting the
 *   watcher reloads nothing, and any change after it returns is seen.
 * - A change seen while `onChange` runs is compared after it returns, so
 *   reloads never overlap and the last bytes written are always the ones
 *   loaded last.
 * - A file that cannot be read (between a delete and a create, say) is
 *   logged once and compared again when it is back; its bytes are compared
 *   with the last bytes read, so a file that comes back unchanged is no change.
 * - Half-written bytes are reloaded like any others: the reload refuses them
 *   and keeps the configuration in use, and the completed file differs again.
 */
export function watchConfigFile(
  path: string,
  onChange: () => unknown,
  logger: Logger,
  intervalMs: number = WATCH_INTERVAL_MS,
): ConfigWatcher {
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let last: string | undefined;
  let unreadable = false;

  const digest = async (): Promise<string | undefined> => {
    try {
      const hash = createHash('sha256')
        .update(await readFile(path))
        .digest('hex');
      if (unreadable) logger.info({ path }, 'configuration file readable again');
      unreadable = false;
      return hash;
    } catch (error) {
      if (!unreadable) {
        logger.warn(
          { path, code: (error as NodeJS.ErrnoException).code },
          'configuration file unreadable; keeping the configuration in use',
        );
      }
      unreadable = true;
      return undefined;
    }
  };

  const poll = async (): Promise<void> => {
    const current = await digest();
    if (current !== undefined && last !== undefined && current !== last && !closed) {
      last = current;
      logger.info({ path }, 'configuration file changed: reloading');
      try {
        await onChange();
      } catch (error) {
        logger.error({ err: error }, 'configuration reload failed');
      }
    } else if (current !== undefined) {
      last = current;
    }
  };

  const schedule = (): void => {
    if (closed) return;
    timer = setTimeout(() => void poll().finally(schedule), intervalMs);
    // Never keeps the process alive on its own: `run` ends when the service stops.
    timer.unref();
  };

  try {
    last = createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch {
    // Unreadable now: the first poll that reads it takes the baseline (and logs why not before).
  }
  schedule();

  return {
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
