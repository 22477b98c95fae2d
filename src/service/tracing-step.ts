import type { Logger } from 'pino';
import { startTracing, tracingWanted } from '../tracing/tracing.js';
import type { Started } from './started.js';

/**
 * The first step of `run`: OpenTelemetry tracing when the standard OTEL_
 * variables ask for it (see tracingWanted), else nothing is loaded. Its
 * release, which runs after the delivery pump and the worker have stopped
 * (releases run last started first), exports the spans still buffered.
 */
export async function startTracingStep(env: NodeJS.ProcessEnv, logger: Logger, started: Started): Promise<void> {
  const wanted = tracingWanted(env);
  if (typeof wanted === 'object') {
    logger.warn(
      { OTEL_TRACES_EXPORTER: wanted.unsupported },
      'tracing: only the otlp exporter (OTLP over HTTP, JSON) is supported; tracing stays off',
    );
    return;
  }
  const tracing = await startTracing(env);
  if (tracing === null) return;
  started.add(async () => {
    await tracing.shutdown().catch((error: unknown) => {
      logger.warn(
        { err: error instanceof Error ? error.message : String(error) },
        'tracing: could not export the last spans',
      );
    });
  });
  logger.info(
    { exporter: tracing.exporter },
    'tracing on: spans go to the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT',
  );
}
