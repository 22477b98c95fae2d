import { InvalidArgumentError, type Command } from 'commander';
import { listDeadLetters, redeliver, renderDeadLetters } from '../../investigate/dead-letters.js';
import { eventsInWindow, renderEvents } from '../../investigate/events-in-window.js';
import { isEventId, renderTrace, traceEvent } from '../../investigate/trace.js';
import { assertKnownWebhook } from '../../investigate/known-webhook.js';
import { withDatabase } from '../database.js';
import { stringifyWithExactIds } from '../json-output.js';
import { parseDecimalIdOption, parseIntegerOption } from '../options.js';

// An ISO-8601 date, optionally with a time and an offset; without an offset it is UTC.
const ISO_TIME = /^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?)?(Z|[+-]\d\d(?::?\d\d)?)?$/i;

function parseTime(name: string): (value: string) => Date {
  return (value) => {
    const refuse = (): never => {
      throw new InvalidArgumentError(`${name}: expected an ISO-8601 time such as 2026-11-22T09:00:00Z (UTC when no offset is given), got ${JSON.stringify(value)}`);
    };
    const match = ISO_TIME.exec(value.trim()) ?? refuse();
    const [year, month, day, hour = 0, minute = 0, second = 0] = match.slice(1, 7).map((part) => (part === undefined ? undefined : Number(part)));
    const fields = [year!, month! - 1, day!, hour, minute, second] as const;
    const milliseconds = Number((match[7] ?? '0').padEnd(3, '0').slice(0, 3));
    const utc = new Date(Date.UTC(...fields, milliseconds));
    // Date.UTC rolls 2026-02-30 over into March: a field that changed was out of range.
    const back = [utc.getUTCFullYear(), utc.getUTCMonth(), utc.getUTCDate(), utc.getUTCHours(), utc.getUTCMinutes(), utc.getUTCSeconds()];
    if (back.some((field, index) => field !== fields[index])) refuse();
    const offset = match[8] ?? 'Z';
    if (offset.toUpperCase() === 'Z') return utc;
    const [, sign, offsetHours, offsetMinutes = '0'] = /^([+-])(\d\d):?(\d\d)?$/.exec(offset)!;
    if (Number(offsetHours) > 23 || Number(offsetMinutes) > 59) refuse();
    const offsetMs = (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000 * (sign === '-' ? -1 : 1);
    return new Date(utc.getTime() - offsetMs);
  };
}

function parseEventId(value: string): string {
  if (!isEventId(value)) throw new InvalidArgumentError(`EVENT_ID: expected a UUID, got ${JSON.stringify(value)}`);
  return value.toLowerCase();
}

function print(value: unknown, json: boolean | undefined, render: () => string): void {
  process.stdout.write(`${json ? stringifyWithExactIds(value) : render()}\n`);
}

/** trace, events and dead-letters: the operator's questions (CONTRACT section 2). */
export function registerInvestigation(program: Command): void {
  program
    .command('trace')
    .argument('<eventId>', 'the eventId, as receivers got it', parseEventId)
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
    .option('--asset <assetId>', 'only this asset', parseDecimalIdOption('--asset'))
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (options: { from: Date; to: Date; webhook?: string; asset?: string; json?: boolean; databaseUrl?: string }, command: Command) => {
      if (options.from.getTime() >= options.to.getTime()) {
        command.error(`--from: expected a time before --to (${options.to.toISOString()}), got ${options.from.toISOString()}`, { exitCode: 2, code: 'asset-webhooks.window' });
      }
      const events = await withDatabase(options.databaseUrl, async (pool) => {
        if (options.webhook !== undefined) await assertKnownWebhook(pool, options.webhook);
        return eventsInWindow(pool, { from: options.from, to: options.to, webhookId: options.webhook, assetId: options.asset });
      });
      print(events, options.json, () => renderEvents(events));
    });

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
      print(letters, options.json, () => renderDeadLetters(letters));
    });

  deadLetters
    .command('redeliver')
    .argument('<payloadId>', 'the dead-lettered payload', parseIntegerOption('PAYLOAD_ID', 1, Number.MAX_SAFE_INTEGER))
    .description('Send one dead-lettered payload again: same body, same eventIds, a fresh series of attempts. Recorded.')
    .option('--to <webhookId>', 'send it to this enabled webhook instead of its own (e.g. the new id of a webhook whose url changed)')
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (id: number, options: { to?: string; json?: boolean; databaseUrl?: string }) => {
      // Options written before the subcommand's name belong to `dead-letters`.
      const parent = deadLetters.opts<{ json?: boolean; databaseUrl?: string }>();
      const databaseUrl = options.databaseUrl ?? parent.databaseUrl;
      const result = await withDatabase(databaseUrl, (pool) => redeliver(pool, id, undefined, options.to));
      if (result.webhookState !== 'enabled') {
        const state = result.webhookState === 'disabled' ? 'is disabled or no longer configured' : 'has not been run by the service';
        process.stderr.write(`warning: webhook ${result.webhookId} ${state}: the payload waits until the webhook is enabled (then SIGHUP), ` +
          'and is dead-lettered as expired if that takes longer than retry.deadLetterAfterSeconds; ' +
          `to send it to another webhook: asset-webhooks dead-letters redeliver ${id} --to WEBHOOK_ID\n`);
      }
      const moved = result.movedFrom === null ? '' : ` (moved from webhook ${result.movedFrom})`;
      print({ payloadId: id, webhookId: result.webhookId, series: result.series, webhookState: result.webhookState, movedFrom: result.movedFrom },
        options.json ?? parent.json,
        () => `payload ${id} of webhook ${result.webhookId}${moved} queued for redelivery (series ${result.series}); ` +
          (result.webhookState === 'enabled' ? 'a running service sends it' : 'it is not sent while the webhook is not enabled'));
    });
}
