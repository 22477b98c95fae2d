import { pino, type Logger } from 'pino';

/**
 * The service's logger: JSON lines on stderr at LOG_LEVEL (default info).
 * Header values are redacted by path as a second line of defence; secrets are
 * never passed to the logger in the first place.
 */
export function createLogger(
  options: { level?: string | undefined; destination?: NodeJS.WritableStream } = {},
): Logger {
  return pino(
    {
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { service: 'asset-webhooks' },
      redact: { paths: ['headers', '*.headers', 'apiKey', '*.apiKey', 'secret', '*.secret'], censor: '[redacted]' },
    },
    options.destination ?? pino.destination(2),
  );
}
