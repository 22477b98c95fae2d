import type { Command } from 'commander';
import { assertKnownWebhook } from '../../investigate/known-webhook.js';
import { REPLAY_EVENT_TYPES, replay, type ReplayResult } from '../../replay/replay.js';
import { printable, quotedPrefix } from '../../text/printable.js';
import { withDatabase } from '../database.js';
import { parseDecimalIdOption } from '../options.js';
import { stopOnSignals } from '../stop-signals.js';
import { parseTime } from '../time-option.js';
import { UsageError } from '../usage-error.js';

interface ReplayCommandOptions {
  readonly webhook: string;
  readonly from: Date;
  readonly to: Date;
  readonly asset?: string[];
  readonly eventType?: string[];
  readonly toWebhook?: string;
  readonly dryRun?: boolean;
  readonly json?: boolean;
  readonly databaseUrl?: string;
}

const parseAssetId = parseDecimalIdOption('--asset');

/** --asset, repeatable or with several values: asset ids as decimal text (they may exceed 2^53). */
function collectAssetId(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), parseAssetId(value)];
}

/** --event-type, repeatable: a type as payloads carry it (upper case; `Edited`, as the configuration names it, is read as EDITED). */
function collectEventType(value: string, previous: string[] | undefined): string[] {
  const type = value.toUpperCase();
  if (!(REPLAY_EVENT_TYPES as readonly string[]).includes(type)) {
    throw new UsageError(`--event-type: expected one of ${REPLAY_EVENT_TYPES.join(', ')}, got ${quotedPrefix(value)}`);
  }
  return [...(previous ?? []), type];
}

/** What became of the payloads, by the state of the webhook they are sent to. */
function whatNext(result: ReplayResult): string {
  const to = result.movedTo ?? result.webhookId;
  switch (result.webhookState) {
    case 'enabled':
      return 'a running service sends them in payload order, ahead of newer payloads still waiting';
    case 'paused':
      return `webhook ${to} is paused: they wait, without expiring, until paused is false again (then SIGHUP)`;
    case 'suspended':
      return `webhook ${to} was suspended by a 410 Gone answer: they wait, without expiring, until \`asset-webhooks resume --webhook ${to}\``;
    default:
      return `webhook ${to} is not sent to (${result.webhookState}): they wait, and expire after retry.deadLetterAfterSeconds`;
  }
}

function summary(result: ReplayResult): string {
  const name = result.replayId === null ? 'replay' : `replay ${result.replayId}`;
  const moved = result.movedTo === null ? '' : ` to webhook ${result.movedTo}`;
  const count = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`;
  const what = `${count(result.payloads, 'payload')} (${count(result.events, 'event')})`;
  const upTo = result.lastPayloadId === null ? '' : ` (done up to payload ${result.lastPayloadId})`;
  const resumed = result.resumed
    ? `; ${result.dryRun ? 'would resume' : 'resumed'} an interrupted replay with these arguments`
    : '';
  if (result.dryRun)
    return `dry run of ${name} of webhook ${result.webhookId}${moved}: ${what} would be sent again${resumed}; nothing changed`;
  if (result.status !== 'completed')
    return `${name} of webhook ${result.webhookId}${moved}: ${what} queued again${upTo}${resumed}; interrupted: run the same command again to resume`;
  return `${name} of webhook ${result.webhookId}${moved}: ${what} queued again${upTo}${resumed}; ${whatNext(result)}`;
}

async function replayCommand(options: ReplayCommandOptions): Promise<void> {
  if (options.from.getTime() >= options.to.getTime()) {
    throw new UsageError(
      `--from: expected a time before --to (${options.to.toISOString()}), got ${options.from.toISOString()}`,
    );
  }
  const dryRun = options.dryRun === true;
  const stop = stopOnSignals('replay', 'stopping after the current batch commits');
  const result = await withDatabase(options.databaseUrl, async (pool) => {
    await assertKnownWebhook(pool, options.webhook);
    return replay({
      pool,
      dryRun,
      signal: stop.signal,
      moveTo: options.toWebhook,
      selection: {
        webhookId: options.webhook,
        from: options.from,
        to: options.to,
        assetIds: options.asset === undefined ? null : [...new Set(options.asset)],
        eventTypes: options.eventType === undefined ? null : [...new Set(options.eventType)],
      },
    });
  }).finally(() => stop.release());
  process.stdout.write(
    `${options.json === true ? JSON.stringify({ ...result, maxRssBytes: process.resourceUsage().maxRSS * 1024 }) : printable(summary(result))}\n`,
  );
  if (result.status !== 'completed' && !dryRun) process.exitCode = stop.exitCode ?? 1;
}

/** `replay`: the delivered payloads of a window sent again, each as a new series (docs/operations.md, replay). */
export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description(
      'Send the delivered payloads of a webhook created within [--from, --to) again, in payload order, each as a new series of ' +
        "attempts of the same payload. A payload's creation is when coalescing packed its events, seconds after they occurred; " +
        'retries and replays never change it, so the same window names the same payloads. Each is sent ' +
        'with the same body, eventIds and webhook-id. With --asset or --event-type, only payloads ' +
        'holding at least one matching event (sent whole). Prints how many payloads and events. Batches of 500 commit as they go: ' +
        'interrupted (Ctrl-C, a kill), the same command resumes after the last batch; once completed, the same command replays again.',
    )
    .requiredOption('--webhook <id>', 'the webhook whose delivered payloads are replayed')
    .requiredOption(
      '--from <time>',
      'payloads created at or after this time (ISO-8601; UTC when no offset is given)',
      parseTime('--from'),
    )
    .requiredOption('--to <time>', 'payloads created before this time (ISO-8601)', parseTime('--to'))
    .option(
      '--asset <assetId...>',
      'only payloads holding an event of these assets (`--asset 1 2` or repeated)',
      collectAssetId,
    )
    .option(
      '--event-type <type...>',
      `only payloads holding an event of these types (${REPLAY_EVENT_TYPES.join(', ')})`,
      collectEventType,
    )
    .option(
      '--to-webhook <webhookId>',
      'send them to this webhook instead (enabled, paused or suspended in the running service); UNMATCHED only to a mirror webhook',
    )
    .option('--dry-run', 'count what would be sent, change nothing')
    .option('--json', 'machine-readable result on stdout (with the peak memory of the process, maxRssBytes)')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(replayCommand);
}
