import type { Command } from 'commander';
import { redeliver, type WebhookState } from '../../investigate/dead-letters.js';
import {
  DEAD_LETTER_REASONS,
  redeliverDeadLetters,
  type DeadLetterSelection,
} from '../../investigate/bulk-redeliver.js';
import { assertKnownWebhook } from '../../investigate/known-webhook.js';
import { withDatabase } from '../database.js';
import { parseIntegerOption } from '../options.js';
import { parseTime } from '../time-option.js';
import { printable, quotedPrefix } from '../../text/printable.js';

/** The options of `dead-letters redeliver` as commander gives them: `--to` is read once the other arguments say what it is. */
export interface RedeliverOptions {
  readonly webhook?: string | undefined;
  readonly from?: Date | undefined;
  readonly to?: string | undefined;
  readonly toWebhook?: string | undefined;
  readonly reason?: string | undefined;
  readonly dryRun?: boolean | undefined;
}

/**
 * What `dead-letters redeliver` was asked to do. The two forms share `--to`:
 *  - `PAYLOAD_ID [--to WEBHOOK_ID]`: one payload, again to its own webhook or
 *    moved to another one (`--to` names a webhook; `--to-webhook` is the same);
 *  - `--webhook ID [--from TIME] [--to TIME] [--reason R] [--to-webhook ID]
 *    [--dry-run]`: every matching dead letter of the webhook (`--to` is the
 *    end of the window), moved to another webhook with `--to-webhook`.
 */
export type RedeliverRequest =
  | { readonly kind: 'one'; readonly payloadId: number }
  | { readonly kind: 'moved'; readonly payloadId: number; readonly toWebhookId: string; readonly option: string }
  | {
      readonly kind: 'bulk';
      readonly selection: DeadLetterSelection;
      readonly moveTo: string | undefined;
      readonly dryRun: boolean;
    };

/** Reads the request from the arguments, or returns the one-line usage error (exit 2) for a mixture of the two forms. */
export function redeliverRequest(
  payloadId: number | undefined,
  options: RedeliverOptions,
): RedeliverRequest | { readonly usageError: string } {
  const bulkOnly = (['from', 'reason', 'dryRun'] as const).filter(
    (key) => options[key] !== undefined && options[key] !== false,
  );
  const flag = { from: '--from', reason: '--reason', dryRun: '--dry-run' } as const;
  if (payloadId !== undefined) {
    if (options.webhook !== undefined) {
      return {
        usageError: `PAYLOAD_ID: expected either PAYLOAD_ID (one payload) or --webhook ID (every dead letter of a webhook), got both (${payloadId} and --webhook ${options.webhook})`,
      };
    }
    if (bulkOnly.length > 0) {
      return {
        usageError: `${flag[bulkOnly[0]!]}: goes with --webhook ID (every dead letter of a webhook), not with PAYLOAD_ID ${payloadId}`,
      };
    }
    if (options.to !== undefined && options.toWebhook !== undefined) {
      return {
        usageError: `--to-webhook: expected either --to WEBHOOK_ID or --to-webhook WEBHOOK_ID with PAYLOAD_ID ${payloadId}, got both`,
      };
    }
    if (options.toWebhook !== undefined)
      return { kind: 'moved', payloadId, toWebhookId: options.toWebhook, option: '--to-webhook' };
    return options.to === undefined
      ? { kind: 'one', payloadId }
      : { kind: 'moved', payloadId, toWebhookId: options.to, option: '--to' };
  }
  if (options.webhook === undefined) {
    return {
      usageError:
        'PAYLOAD_ID: expected PAYLOAD_ID (one payload) or --webhook ID (every dead letter of a webhook), got neither',
    };
  }
  let to: Date | undefined;
  if (options.to !== undefined) {
    try {
      to = parseTime('--to')(options.to);
    } catch (error) {
      // With --webhook, --to ends the window; a webhook id there was most likely meant as the target.
      return {
        usageError: `${(error as Error).message} (with --webhook, --to ends the time window; to move the dead letters to another webhook: --to-webhook WEBHOOK_ID)`,
      };
    }
  }
  if (options.from !== undefined && to !== undefined && options.from.getTime() >= to.getTime()) {
    return {
      usageError: `--from: expected a time before --to (${to.toISOString()}), got ${options.from.toISOString()}`,
    };
  }
  if (options.reason !== undefined && !(DEAD_LETTER_REASONS as readonly string[]).includes(options.reason)) {
    return {
      usageError: `--reason: expected one of ${DEAD_LETTER_REASONS.join(', ')}, got ${quotedPrefix(options.reason)}`,
    };
  }
  return {
    kind: 'bulk',
    selection: { webhookId: options.webhook, from: options.from, to, reason: options.reason },
    moveTo: options.toWebhook,
    dryRun: options.dryRun === true,
  };
}

/** The value as JSON, or its one-line rendering escaped for a terminal. */
function print(value: unknown, json: boolean | undefined, render: () => string): void {
  process.stdout.write(`${json ? JSON.stringify(value) : printable(render())}\n`);
}

/**
 * Says on stderr what becomes of redelivered payloads whose webhook is not
 * sent to (see WebhookState), and for those that wait in vain how to move
 * them (`moveCommand`, the command with WEBHOOK_ID to fill in).
 */
function warnNotSent(webhookId: string, state: WebhookState, count: number, moveCommand: string): void {
  const [them, wait, are] = count === 1 ? ['the payload', 'waits', 'is'] : ['the payloads', 'wait', 'are'];
  const move = `; to send ${count === 1 ? 'it' : 'them'} to another webhook: ${moveCommand}`;
  const warning = {
    enabled: null,
    paused: `is paused: ${them} ${wait}, without expiring, until paused is false again (then SIGHUP)`,
    suspended:
      `was suspended by a 410 Gone answer (retry.disableOnGone): ${them} ${wait}, without expiring, ` +
      `until \`asset-webhooks resume --webhook ${webhookId}\` or a new url${move}`,
    disabled:
      `is disabled: ${them} ${wait} until the webhook is enabled (then SIGHUP), ` +
      `and ${are} dead-lettered as expired if that takes longer than retry.deadLetterAfterSeconds${move}`,
    removed:
      `is in the configuration of no running process (removed): ${them} ${are} dead-lettered again as webhook_removed ` +
      `when a run process next records its configuration (before its next coalescing run)${move}`,
    not_configured:
      `has not been run by the service: ${them} ${wait} until a service runs with it enabled, ` +
      `and ${are} dead-lettered as expired if that takes longer than retry.deadLetterAfterSeconds${move}`,
  }[state];
  if (warning !== null) process.stderr.write(`warning: webhook ${printable(webhookId)} ${warning}\n`);
}

/** The bulk command again, as typed, with `--to-webhook WEBHOOK_ID`. */
function bulkMoveCommand(selection: DeadLetterSelection): string {
  return [
    'asset-webhooks dead-letters redeliver --webhook',
    selection.webhookId,
    ...(selection.from ? ['--from', selection.from.toISOString()] : []),
    ...(selection.to ? ['--to', selection.to.toISOString()] : []),
    ...(selection.reason ? ['--reason', selection.reason] : []),
    '--to-webhook WEBHOOK_ID',
  ].join(' ');
}

/** `dead-letters redeliver`: one payload, or every matching dead letter of a webhook; `--to` moves a single one to another webhook (docs/configuration.md, command line). */
export function registerRedeliver(deadLetters: Command): void {
  deadLetters
    .command('redeliver')
    .argument(
      '[PAYLOAD_ID]',
      "the dead-lettered payload (or give --webhook for all of a webhook's)",
      parseIntegerOption('PAYLOAD_ID', 1, Number.MAX_SAFE_INTEGER),
    )
    .description(
      'Send dead-lettered payloads again: same body, same eventIds, a fresh series of attempts, each recorded. ' +
        'PAYLOAD_ID: that payload. --webhook ID: every dead letter of the webhook, dead-lettered within [--from, --to) and of --reason when given, ' +
        'in payload order; prints how many it started (--dry-run: how many it would, changing nothing). ' +
        "--to-webhook ID moves them to another webhook (a removed webhook's dead letters, say).",
    )
    .option('--webhook <id>', 'every dead letter of this webhook')
    .option(
      '--from <time>',
      'with --webhook: dead-lettered at or after this time (ISO-8601; UTC when no offset is given)',
      parseTime('--from'),
    )
    .option(
      '--to <time|webhookId>',
      'with --webhook: dead-lettered before this time (ISO-8601); with PAYLOAD_ID: the webhook to send it to instead of its own',
    )
    .option(
      '--to-webhook <webhookId>',
      'send them to this webhook instead of their own (enabled in the running service): with --webhook, every matching dead letter; with PAYLOAD_ID, as --to',
    )
    .option('--reason <reason>', `with --webhook: only dead letters of this reason (${DEAD_LETTER_REASONS.join(', ')})`)
    .option('--dry-run', 'with --webhook: count the matching dead letters, change nothing')
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(
      async (
        payloadId: number | undefined,
        options: RedeliverOptions & { json?: boolean; databaseUrl?: string },
        command: Command,
      ) => {
        // Options written before the subcommand's name belong to `dead-letters`.
        const parent = deadLetters.opts<{ webhook?: string; json?: boolean; databaseUrl?: string }>();
        const databaseUrl = options.databaseUrl ?? parent.databaseUrl;
        const json = options.json ?? parent.json;
        const request = redeliverRequest(payloadId, { ...options, webhook: options.webhook ?? parent.webhook });
        if ('usageError' in request)
          command.error(request.usageError, { exitCode: 2, code: 'asset-webhooks.redeliver-usage' });
        switch (request.kind) {
          case 'one':
          case 'moved': {
            const id = request.payloadId;
            const [to, option] = request.kind === 'moved' ? [request.toWebhookId, request.option] : [];
            const result = await withDatabase(databaseUrl, (pool) => redeliver(pool, id, undefined, to, option));
            warnNotSent(
              result.webhookId,
              result.webhookState,
              1,
              `asset-webhooks dead-letters redeliver ${id} --to WEBHOOK_ID`,
            );
            const moved = result.movedFrom === null ? '' : ` (moved from webhook ${result.movedFrom})`;
            print(
              {
                payloadId: id,
                webhookId: result.webhookId,
                series: result.series,
                webhookState: result.webhookState,
                movedFrom: result.movedFrom,
              },
              json,
              () =>
                `payload ${id} of webhook ${result.webhookId}${moved} queued for redelivery (series ${result.series}); ` +
                (result.webhookState === 'enabled'
                  ? 'a running service sends it'
                  : result.webhookState === 'removed'
                    ? 'it is not sent: the webhook is removed'
                    : 'it is not sent while the webhook is not enabled'),
            );
            return;
          }
          case 'bulk': {
            const { selection, moveTo, dryRun } = request;
            const result = await withDatabase(databaseUrl, async (pool) => {
              await assertKnownWebhook(pool, selection.webhookId);
              return redeliverDeadLetters(pool, selection, { dryRun, moveTo });
            });
            const sentTo = result.movedTo ?? result.webhookId;
            if (!dryRun && result.count > 0)
              warnNotSent(sentTo, result.webhookState, result.count, bulkMoveCommand(selection));
            const range = result.count === 0 ? '' : ` (payloads ${result.firstPayloadId} to ${result.lastPayloadId})`;
            const what = `${result.count} dead letters of webhook ${result.webhookId}`;
            const moved = result.movedTo === null ? '' : ` moved to webhook ${result.movedTo} and`;
            print(result, json, () =>
              dryRun
                ? `${what} would be${moved} queued for redelivery${range}; dry run, nothing changed`
                : `${what}${moved} queued for redelivery${range}, sent in payload order; ` +
                  (result.webhookState === 'enabled'
                    ? 'a running service sends them'
                    : result.webhookState === 'removed'
                      ? 'they are not sent: the webhook is removed'
                      : 'they are not sent while the webhook is not enabled'),
            );
            return;
          }
        }
      },
    );
}
