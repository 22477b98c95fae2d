import type { Command } from 'commander';
import { configFromEnvOrOption } from '../../config/load.js';
import { describeError, requireDatabaseUrl } from '../../db/connect.js';
import { routeConsoleTo } from '../../logging/console.js';
import { createLogger } from '../../logging/logger.js';
import { startService } from '../../service/service.js';
import { parseIntegerOption } from '../options.js';

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('Run the service: coalescing on the configured interval, and delivery. SIGTERM/SIGINT stop gracefully, SIGHUP reloads the configuration.')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--config <file>', 'configuration document (default: env ASSET_WEBHOOKS_CONFIG)')
    .option('--http-port <port>', 'serve GET /healthz and GET /metrics on this port', parseIntegerOption('--http-port', 0, 65535))
    .option('--concurrency <n>', 'jobs this process runs at once (default 10)', parseIntegerOption('--concurrency', 1, 256))
    .action(async (options: { databaseUrl?: string; config?: string; httpPort?: number; concurrency?: number }) => {
      const logger = createLogger();
      routeConsoleTo(logger);
      const service = await startService({
        databaseUrl: requireDatabaseUrl(options.databaseUrl),
        configPath: configFromEnvOrOption(options.config),
        logger,
        httpPort: options.httpPort,
        concurrency: options.concurrency,
      });
      // graphile-worker can leave a promise rejected with nobody to handle it
      // (failing a job while the database is unreachable); Node would end the
      // process for it, in-flight deliveries and all. Log it and carry on: the
      // job's payload is recovered by maintenance. It stays registered after the
      // stop: graphile-worker fails jobs in batches, after its runner resolved.
      const onUnhandled = (reason: unknown): void => {
        logger.error({ err: describeError(reason) }, 'an operation failed with nobody to handle it; carrying on');
      };
      process.on('unhandledRejection', onUnhandled);
      const stop = (signal: string): void => {
        logger.info({ signal }, 'signal received');
        void service.stop();
      };
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
      process.on('SIGHUP', () => void service.reload());
      await service.stopped;
      await service.stop();
      process.removeListener('SIGTERM', stop);
      process.removeListener('SIGINT', stop);
    });
}
