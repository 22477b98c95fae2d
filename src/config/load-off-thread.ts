import { Worker } from 'node:worker_threads';
import { UserError } from '../errors.js';
import type { Config } from './schema.js';

/** How long a worker may take to read and check a document before it is stopped and the document refused. */
export const OFF_THREAD_LOAD_TIMEOUT_MS = 30_000;
/** The heap a worker may use to read and check a document (a valid one needs a few megabytes). */
export const OFF_THREAD_LOAD_HEAP_MB = 256;

/**
 * loadConfigFile in a worker thread, for a process whose event loop must keep
 * answering (`run`'s probes, deliveries) while a document is read and
 * checked: parsing costs time and memory that grow with the document, and a
 * hostile one is refused only after its parse has begun. The worker's heap is
 * bounded and it is stopped after OFF_THREAD_LOAD_TIMEOUT_MS; either way the
 * document is refused with a UserError like any invalid one.
 */
export function loadConfigFileOffThread(file: string, timeoutMs: number = OFF_THREAD_LOAD_TIMEOUT_MS): Promise<Config> {
  const worker = new Worker(workerUrl(), {
    workerData: { file },
    resourceLimits: { maxOldGenerationSizeMb: OFF_THREAD_LOAD_HEAP_MB },
  });
  // A stop of the process does not wait for a document being checked.
  worker.unref();
  return new Promise<Config>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(
        new UserError(
          'config_invalid',
          `${file}: expected a document checked within ${timeoutMs / 1000} s, got one that took longer`,
        ),
      );
      void worker.terminate();
    }, timeoutMs);
    timer.unref();
    worker.once(
      'message',
      (message: { ok: true; config: Config } | { ok: false; code: string; problems: string[] }) => {
        clearTimeout(timer);
        if (message.ok) resolve(message.config);
        else reject(new UserError(message.code, message.problems));
        void worker.terminate();
      },
    );
    worker.once('error', (error: Error & { code?: string }) => {
      clearTimeout(timer);
      reject(
        new UserError(
          'config_invalid',
          error.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? `${file}: expected a document checked within ${OFF_THREAD_LOAD_HEAP_MB} MB of memory, got one that needs more`
            : `${file}: expected a document that can be checked, got ${error.message}`,
          { cause: error },
        ),
      );
    });
    worker.once('exit', (code) => {
      clearTimeout(timer);
      // After a message or an error the promise is settled already, and this does nothing.
      reject(
        new UserError(
          'config_invalid',
          `${file}: expected a document that can be checked, got a checker that exited (${code})`,
        ),
      );
    });
  });
}

/**
 * The compiled worker beside this module. Run from the TypeScript sources (by
 * the test runner), this module has no compiled neighbour: the build's is used.
 */
function workerUrl(): URL {
  return import.meta.url.endsWith('.ts')
    ? new URL('../../dist/config/load-worker.js', import.meta.url)
    : new URL('./load-worker.js', import.meta.url);
}
