import { parentPort, workerData } from 'node:worker_threads';
import { UserError } from '../errors.js';
import { loadConfigFile } from './load.js';

/**
 * The worker of loadConfigFileOffThread: reads, parses and validates the file
 * named by workerData.file, and posts the configuration or its problems.
 */
const { file } = workerData as { file: string };
try {
  parentPort!.postMessage({ ok: true, config: await loadConfigFile(file) });
} catch (error) {
  parentPort!.postMessage(
    error instanceof UserError
      ? { ok: false, code: error.code, problems: error.problems }
      : {
          ok: false,
          code: 'config_unreadable',
          problems: [`${file}: ${error instanceof Error ? error.message : String(error)}`],
        },
  );
}
