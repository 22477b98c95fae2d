import type { Command } from 'commander';
import { configFromEnvOrOption } from '../../config/load.js';
import { watchConfigFile, type ConfigWatcher } from '../../config/watch.js';
import { describeError, requireDatabaseUrl } from '../../db/connect.js';
import { routeConsoleTo } from '../../logging/console.js';
import { createLogger } from '../../logging/logger.js';
import { limitHeapGrowth } from '../../service/heap-growth.js';
import { DEFAULT_DATABASE_POOL_SIZE, MIN_DATABASE_POOL_SIZE } from '../../service/connection-budget.js';
import { startService, type RunningService } from '../../service/service.js';
import { takeEarlySignals } from '../early-signals.js';
import { parseHostOption, parseIntegerOption } from '../options.js';
import { quotedPrefix } from '../../text/printable.js';

export function registerRun(program: Command): void {
  program
    .command('run')
    .description(
      'Run the service: coalescing on the configured interval, and delivery. SIGTERM/SIGINT stop gracefully, SIGHUP reloads the configuration.',
    )
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--config <file>', 'configuration document (default: env ASSET_WEBHOOKS_CONFIG)')
    .option(
      '--http-port <port>',
      'serve GET /livez, GET /readyz, GET /healthz and GET /metrics on this port',
      parseIntegerOption('--http-port', 0, 65535),
    )
    .option(
      '--http-host <host>',
      'the address --http-port listens on, e.g. 127.0.0.1 for this host only (default: every interface, ' +
        'as Kubernetes probes and Prometheus reach the pod by its own address)',
      parseHostOption('--http-host'),
    )
    .option(
      '--concurrency <n>',
      'graphile-worker jobs (coalescing, maintenance) this process runs at once (default 4)',
      parseIntegerOption('--concurrency', 1, 256),
    )
    .option(
      '--database-pool-size <n>',
      `connections of the process's own pool (deliveries, coalescing, probes, metrics; default ${DEFAULT_DATABASE_POOL_SIZE}). ` +
        'The process opens at most this + --concurrency + 4 connections: graphile-worker takes --concurrency + 2, ' +
        'and one each listens for payloads and holds the process lease',
      parseIntegerOption('--database-pool-size', MIN_DATABASE_POOL_SIZE, 1000),
    )
    .option(
      '--watch-config',
      'reload the configuration, as SIGHUP does, when the bytes of the file change: checked every second through the path, ' +
        'so an edit in place, a rename over it and the symlink swap of a Kubernetes ConfigMap volume are all seen (default: off)',
    )
    .action(
      async (
        options: {
          databaseUrl?: string;
          config?: string;
          httpPort?: number;
          httpHost?: string;
          concurrency?: number;
          databasePoolSize?: number;
          watchConfig?: boolean;
        },
        command: Command,
      ) => {
        if (options.httpHost !== undefined && options.httpPort === undefined) {
          command.error(`--http-host: expected together with --http-port, got ${quotedPrefix(options.httpHost)} alone`);
        }
        const logger = createLogger();
        routeConsoleTo(logger);
        // Said in the line that tells the service runs: a refusal to start stays one line.
        const heapGrowingPercent = limitHeapGrowth();
        // Signals are taken from the first moment: starting takes seconds
        // (database checks, the worker), and Node's default for SIGTERM, SIGINT and
        // SIGHUP is to end the process at once, which a config tool's SIGHUP to
        // every process, or a stop during a restart, must not do. What arrives
        // before the service is up is applied as soon as it is.
        let service: RunningService | undefined;
        let stopRequested = false;
        let reloadRequested = false;
        const stop = (signal: string): void => {
          logger.info({ signal }, 'signal received');
          if (stopRequested) {
            // Start-up may wait on a database that does not answer, and so may a
            // stop (connections a network device dropped without a word). An
            // attempt left in flight is closed by crash recovery in another
            // process once this process's lease is gone, as after a crash.
            logger.warn({ signal }, `second signal ${service ? 'while stopping' : 'during start-up'}: exiting now`);
            process.exit(signal === 'SIGINT' ? 130 : 143);
          }
          stopRequested = true;
          if (service) {
            logger.info('signal again to exit without waiting');
            void service.stop();
          } else {
            logger.info('stopping as soon as start-up completes; signal again to exit now');
          }
        };
        const reload = (): void => {
          if (service) {
            void service.reload();
          } else {
            reloadRequested = true;
            logger.info({ signal: 'SIGHUP' }, 'reloading as soon as start-up completes');
          }
        };
        const configPath = configFromEnvOrOption(options.config);
        // Watched from before the service loads the file, so that a change made
        // while it starts is not missed: it is applied as soon as the service is up.
        const watcher: ConfigWatcher | undefined = options.watchConfig
          ? await watchConfigFile(
              configPath,
              () => {
                if (service) return service.reload();
                reloadRequested = true;
                return undefined;
              },
              logger,
            )
          : undefined;
        process.on('SIGTERM', stop);
        process.on('SIGINT', stop);
        process.on('SIGHUP', reload);
        for (const signal of takeEarlySignals()) {
          if (signal === 'SIGHUP') reload();
          else stop(signal);
        }
        try {
          service = await startService({
            databaseUrl: requireDatabaseUrl(options.databaseUrl),
            configPath,
            logger,
            httpPort: options.httpPort,
            httpHost: options.httpHost,
            concurrency: options.concurrency,
            databasePoolSize: options.databasePoolSize,
            heapGrowingPercent,
          });
        } catch (error) {
          watcher?.close();
          process.removeListener('SIGTERM', stop);
          process.removeListener('SIGINT', stop);
          process.removeListener('SIGHUP', reload);
          throw error;
        }
        // graphile-worker can leave a promise rejected with nobody to handle it
        // (failing a job while the database is unreachable); Node would end the
        // process for it, in-flight deliveries and all. Log it and carry on: the
        // job's payload is recovered by maintenance. It stays registered after the
        // stop: graphile-worker fails jobs in batches, after its runner resolved.
        const onUnhandled = (reason: unknown): void => {
          logger.error({ err: describeError(reason) }, 'an operation failed with nobody to handle it; carrying on');
        };
        process.on('unhandledRejection', onUnhandled);
        if (stopRequested) void service.stop();
        else if (reloadRequested) void service.reload();
        const failure = await service.stopped;
        watcher?.close();
        await service.stop();
        if (failure !== null) {
          // A supervisor that restarts on failure must see one.
          logger.error({ err: failure.message }, 'exiting with status 1: the service cannot work without its worker');
          process.exitCode = 1;
        }
        process.removeListener('SIGTERM', stop);
        process.removeListener('SIGINT', stop);
        process.removeListener('SIGHUP', reload);
      },
    );
}
