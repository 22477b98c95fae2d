import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { startService, type RunningService } from '../../src/service/service.js';

export interface TestService {
  readonly service: RunningService;
  readonly configPath: string;
  /** Rewrites the configuration document (then call service.reload()). */
  writeConfig(yaml: string): void;
  stop(): Promise<void>;
}

export interface TestServiceOptions {
  /** Default: a silent logger. */
  readonly logger?: Logger;
  /** The probe port; none unless given. */
  readonly httpPort?: number;
}

/** Runs the real service in this process against a test database, with a configuration document. */
export async function startTestService(
  databaseUrl: string,
  yaml: string,
  { logger = pino({ level: 'silent' }), httpPort }: TestServiceOptions = {},
): Promise<TestService> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'aw-test-config-'));
  const configPath = path.join(directory, 'config.yaml');
  writeFileSync(configPath, yaml);
  const service = await startService({ databaseUrl, configPath, logger, concurrency: 8, httpPort });
  return {
    service,
    configPath,
    writeConfig: (next) => writeFileSync(configPath, next),
    stop: async () => {
      await service.stop();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
