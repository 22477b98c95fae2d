import { InvalidArgumentError, type Command } from 'commander';
import { listDeadLetters, redeliver, renderDeadLetters } from '../../investigate/dead-letters.js';
import { eventsInWindow, renderEvents } from '../../investigate/events-in-window.js';
import { renderTrace, traceEvent } from '../../investigate/trace.js';
import { withDatabase } from '../database.js';
import { parseIntegerOption } from '../options.js';

function parseTime(name: string): (value: string) => Date {
  return (value) => {
    const time = new Date(value);
    if (!/^\d{4}-\d\d-\d\d/.test(value) || Number.isNaN(time.getTime())) {
      throw new InvalidArgumentError(`${name}: expected an ISO-8601 time such as 2026-11-22T09:00:00Z, got ${JSON.stringify(value)}`);
    }
    return time;
  };
}

function print(value: unknown, json: boolean | undefined, render: () => string): void {
  process.stdout.write(`${json ? JSON.stringify(value) : render()}\n`);
}

/** trace, events and dead-letters: the operator's questions (CONTRACT section 2). */
export function registerInvestigation(program: Command): void {
  program
    .command('trace <eventId>')
    .description('The life of one event: when it occurred; per webhook, excluded (by which check), collapsed, or carried in which payload; every attempt; the final state.')
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (eventId: string, options: { json?: boolean; databaseUrl?: string }) => {
      const trace = await withDatabase(options.databaseUrl, (pool) => traceEvent(pool, eventId));
      print(trace, options.json, () => renderTrace(trace));
    });

  program
    .command('events')
    .description('The events that occurred in a time window, with their outcome per webhook.')
    .requiredOption('--from <time>', 'start of the window (ISO-8601, inclusive)', parseTime('--from'))
    .requiredOption('--to <time>', 'end of the window (ISO-8601, exclusive)', parseTime('--to'))
    .option('--webhook <id>', 'only this webhook')
    .option('--asset <assetId>', 'only this asset', parseIntegerOption('--asset', 1, Number.MAX_SAFE_INTEGER))
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (options: { from: Date; to: Date; webhook?: string; asset?: number; json?: boolean; databaseUrl?: string }) => {
      const events = await withDatabase(options.databaseUrl, (pool) =>
        eventsInWindow(pool, { from: options.from, to: options.to, webhookId: options.webhook, assetId: options.asset }));
      print(events, options.json, () => renderEvents(events));
    });

  const deadLetters = program
    .command('dead-letters')
    .description('The dead-letter store: payloads that will not be attempted again, with why.')
    .option('--webhook <id>', 'only this webhook')
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (options: { webhook?: string; json?: boolean; databaseUrl?: string }) => {
      const letters = await withDatabase(options.databaseUrl, (pool) => listDeadLetters(pool, options.webhook));
      print(letters, options.json, () => renderDeadLetters(letters));
    });

  deadLetters
    .command('redeliver <payloadId>')
    .description('Send one dead-lettered payload again: same body, same eventIds, a fresh series of attempts. Recorded.')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (payloadId: string, options: { databaseUrl?: string }) => {
      const id = parseIntegerOption('PAYLOAD_ID', 1, Number.MAX_SAFE_INTEGER)(payloadId);
      const databaseUrl = options.databaseUrl ?? deadLetters.opts<{ databaseUrl?: string }>().databaseUrl;
      const result = await withDatabase(databaseUrl, (pool) => redeliver(pool, id));
      process.stdout.write(`payload ${id} of webhook ${result.webhookId} queued for redelivery (series ${result.series}); a running service sends it\n`);
    });
}
