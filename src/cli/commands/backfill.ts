import type { Command } from 'commander';
import type pg from 'pg';
import { backfill, type BackfillProgress, type BackfillResult } from '../../backfill/backfill.js';
import type { WebhookConfig } from '../../config/schema.js';
import { UserError } from '../../errors.js';
import { quotedPrefix } from '../../text/printable.js';
import { runSweepCommand, type SweepCommandOptions } from '../sweep-command.js';
import { UsageError } from '../usage-error.js';

const INT8_MAX = 9_223_372_036_854_775_807n;

/** --asset, repeatable: a positive bigint, kept as its decimal string (it may exceed 2^53). */
function collectAssetId(value: string, previous: string[] | undefined): string[] {
  if (!/^[1-9]\d{0,18}$/.test(value) || BigInt(value) > INT8_MAX) {
    throw new UsageError(
      `--asset: expected an asset id, a positive integer up to ${INT8_MAX}, got ${quotedPrefix(value)}`,
    );
  }
  return [...(previous ?? []), value];
}

function progressLine(webhookId: string, progress: BackfillProgress, dryRun: boolean): string {
  const name = progress.backfillId === null ? 'backfill' : `backfill ${progress.backfillId}`;
  return (
    `${dryRun ? 'dry run of ' : ''}${name} of webhook ${webhookId}: ${progress.assetsRead} assets read, ` +
    `${progress.eventsSent} ${dryRun ? 'would be sent' : 'sent'} in ${progress.payloads} payloads, ${progress.excluded} excluded by its checks` +
    (progress.lastAssetId === null ? '' : ` (done up to asset ${progress.lastAssetId})`)
  );
}

/** The summary's lines on exclusions and listed assets that do not exist. */
function details(result: BackfillResult): string[] {
  const lines: string[] = [];
  const checks = Object.entries(result.excludedBy).sort(([a], [b]) => (a < b ? -1 : 1));
  if (checks.length > 0) lines.push(`  excluded by: ${checks.map(([check, n]) => `${check} ${n}`).join(', ')}`);
  if (result.missingCount > 0)
    lines.push(
      `  ${result.missingCount} listed assets do not exist: ${result.missing.slice(0, 20).join(', ')}${result.missingCount > 20 ? ', ...' : ''}`,
    );
  return lines;
}

/** Refuses a webhook a backfill cannot serve: a mirror one (reconcile keeps its set), a disabled one, one without Edited. */
function assertBackfillable(webhook: WebhookConfig): void {
  if (webhook.mirror)
    throw new UserError(
      'webhook_is_mirror',
      `--webhook: expected a webhook without mirror, got ${webhook.id}, a mirror webhook: use reconcile --webhook ${webhook.id}, which also keeps its set`,
    );
  if (!webhook.enabled)
    throw new UserError(
      'webhook_disabled',
      `--webhook: expected an enabled webhook, got ${webhook.id}, which is disabled (enabled: false) and receives nothing`,
    );
  if (!webhook.eventTypes.includes('EDITED')) {
    throw new UserError(
      'webhook_without_edited',
      `--webhook: expected a webhook that takes Edited events (a backfill sends EDITED), got ${webhook.id} with eventTypes [${webhook.eventTypes.join(', ')}]`,
    );
  }
}

/** Warns when no running service sends the webhook's payloads: they wait, and expire. */
async function warnIfNotRunning(pool: pg.Pool, webhookId: string): Promise<void> {
  const {
    rows: [known],
  } = await pool.query<{ enabled: boolean }>('select enabled from asset_webhooks.webhooks where webhook_id = $1', [
    webhookId,
  ]);
  if (known?.enabled === true) return;
  process.stderr.write(
    `warning: webhook ${webhookId} ${known === undefined ? 'has not been run by the service' : 'is disabled in the running service'}: ` +
      'its payloads wait until a service runs with it enabled, and expire after retry.deadLetterAfterSeconds\n',
  );
}

interface BackfillCommandOptions extends SweepCommandOptions {
  readonly asset?: string[];
}

function backfillCommand(options: BackfillCommandOptions): Promise<void> {
  return runSweepCommand<BackfillProgress, BackfillResult>(options, {
    kind: 'backfill',
    refuse: assertBackfillable,
    warn: async (pool, webhook) => {
      if (options.dryRun !== true) await warnIfNotRunning(pool, webhook.id);
    },
    sweep: (context) => backfill({ ...context, assetIds: options.asset }),
    progressLine,
    details,
    resumedWhat: 'an interrupted backfill with these arguments',
    completedLine: 'completed; a running service sends the payloads after those already waiting for the webhook',
    jsonOf: (result) => ({ ...result, maxRssBytes: process.resourceUsage().maxRSS * 1024 }),
    printed: (result) => {
      if (result.status === 'completed' || result.dryRun) return;
      process.stderr.write(
        `backfill ${result.backfillId} of webhook ${result.webhookId}: interrupted, done up to asset ${result.lastAssetId ?? '(none)'}; ` +
          'run the same command again to resume\n',
      );
    },
  });
}

/** `backfill`: one EDITED event per asset that passes a webhook's checks, to that webhook only (docs/configuration.md, `backfill`). */
export function registerBackfill(program: Command): void {
  program
    .command('backfill')
    .description(
      'Send one EDITED event with a new eventId, to one webhook only, for every asset that is not in the Trash and passes its checks now ' +
        '(or for each listed asset that is and does), in payloads after those already waiting for it. Interrupted (Ctrl-C, a kill), the same command resumes without sending an asset twice; ' +
        'once completed, the same command starts a new backfill. Progress on stderr.',
    )
    .requiredOption('--webhook <id>', 'the webhook, as configured')
    .option(
      '--asset <assetId...>',
      'only these assets (`--asset 1 2 3` or repeated); default every asset',
      collectAssetId,
    )
    .option('--dry-run', 'count what would be sent, change nothing')
    .option('--json', 'machine-readable result on stdout (with the peak memory of the process, maxRssBytes)')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--config <file>', 'configuration document (default: env ASSET_WEBHOOKS_CONFIG)')
    .action(backfillCommand);
}
