import type { Command } from 'commander';
import { listDeadLetters, renderDeadLetters } from '../../investigate/dead-letters.js';
import { eventsInWindow, renderEvents } from '../../investigate/events-in-window.js';
import { isEventId, traceEvent } from '../../investigate/trace.js';
import { renderTrace } from '../../investigate/trace-render.js';
import { assertKnownWebhook } from '../../investigate/known-webhook.js';
import { withDatabase } from '../database.js';
import { registerRedeliver } from './dead-letters-redeliver.js';
import { stringifyWithExactIds } from '../json-output.js';
import { parseDecimalIdOption, parseIntegerOption } from '../options.js';
import { parseTime } from '../time-option.js';
import { printableValues, quotedPrefix } from '../../text/printable.js';
import { UsageError } from '../usage-error.js';

function parseEventId(value: string): string {
  if (!isEventId(value)) throw new UsageError(`EVENT_ID: expected a UUID, got ${quotedPrefix(value)}`);
  return value.toLowerCase();
}

/** The value as JSON, or rendered as text from a copy whose strings are escaped for a terminal (see printableValues). */
function print<T>(value: T, json: boolean | undefined, render: (printable: T) => string): void {
  process.stdout.write(`${json ? stringifyWithExactIds(value) : render(printableValues(value))}\n`);
}

/** trace, events and dead-letters: the operator's questions about missed events (docs/configuration.md, command line). */
export function registerInvestigation(program: Command): void {
  program
    .command('trace')
    .argument('<EVENT_ID>', 'the eventId, as receivers got it', parseEventId)
    .description(
      'The life of one event: when it occurred; per webhook, excluded (by which check), collapsed, or carried in which payload; every attempt; the final state.',
    )
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (eventId: string, options: { json?: boolean; databaseUrl?: string }) => {
      const trace = await withDatabase(options.databaseUrl, (pool) => traceEvent(pool, eventId));
      print(trace, options.json, renderTrace);
    });

  program
    .command('events')
    .description('The events that occurred in a time window, with their outcome per webhook.')
    .requiredOption('--from <time>', 'start of the window (ISO-8601, inclusive)', parseTime('--from'))
    .requiredOption('--to <time>', 'end of the window (ISO-8601, exclusive)', parseTime('--to'))
    .option('--webhook <id>', 'only this webhook')
    .option('--asset <assetId>', 'only this asset', parseDecimalIdOption('--asset'))
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(
      async (
        options: { from: Date; to: Date; webhook?: string; asset?: string; json?: boolean; databaseUrl?: string },
        command: Command,
      ) => {
        if (options.from.getTime() >= options.to.getTime()) {
          command.error(
            `--from: expected a time before --to (${options.to.toISOString()}), got ${options.from.toISOString()}`,
            { exitCode: 2, code: 'asset-webhooks.window' },
          );
        }
        const events = await withDatabase(options.databaseUrl, async (pool) => {
          if (options.webhook !== undefined) await assertKnownWebhook(pool, options.webhook);
          return eventsInWindow(pool, {
            from: options.from,
            to: options.to,
            webhookId: options.webhook,
            assetId: options.asset,
          });
        });
        print(events, options.json, renderEvents);
      },
    );

  const deadLetters = program
    .command('dead-letters')
    .description('The dead-letter store: payloads that will not be attempted again, with why.')
    .option('--webhook <id>', 'only this webhook')
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (options: { webhook?: string; json?: boolean; databaseUrl?: string }) => {
      const letters = await withDatabase(options.databaseUrl, async (pool) => {
        if (options.webhook !== undefined) await assertKnownWebhook(pool, options.webhook);
        return listDeadLetters(pool, options.webhook);
      });
      print(letters, options.json, renderDeadLetters);
    });

  registerRedeliver(deadLetters);
}
