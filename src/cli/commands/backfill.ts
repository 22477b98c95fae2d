import type { Command } from 'commander';
import { backfill, type BackfillProgress, type BackfillResult } from '../../backfill/backfill.js';
import { loadConfiguredWebhook } from '../../config/load.js';
import { UserError } from '../../errors.js';
import { BINDING_VIEW_COLUMNS } from '../../db/asset-state.js';
import { assertBinding } from '../../migrate/binding-check.js';
import { withDatabase } from '../database.js';
import { stopOnSignals } from '../stop-signals.js';
import { printableValues, quotedPrefix } from '../../text/printable.js';
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

/** Assets read between two progress lines. */
const PROGRESS_EVERY = 10_000;

function progressLine(webhookId: string, progress: BackfillProgress, dryRun: boolean): string {
  const name = progress.backfillId === null ? 'backfill' : `backfill ${progress.backfillId}`;
  return (
    `${dryRun ? 'dry run of ' : ''}${name} of webhook ${webhookId}: ${progress.assetsRead} assets read, ` +
    `${progress.eventsSent} ${dryRun ? 'would be sent' : 'sent'} in ${progress.payloads} payloads, ${progress.excluded} excluded by its checks` +
    (progress.lastAssetId === null ? '' : ` (done up to asset ${progress.lastAssetId})`)
  );
}

function summary(result: BackfillResult): string {
  const lines = [progressLine(result.webhookId, result, result.dryRun)];
  const checks = Object.entries(result.excludedBy).sort(([a], [b]) => (a < b ? -1 : 1));
  if (checks.length > 0) lines.push(`  excluded by: ${checks.map(([check, n]) => `${check} ${n}`).join(', ')}`);
  if (result.missingCount > 0)
    lines.push(
      `  ${result.missingCount} listed assets do not exist: ${result.missing.slice(0, 20).join(', ')}${result.missingCount > 20 ? ', ...' : ''}`,
    );
  if (result.resumed)
    lines.push(`  ${result.dryRun ? 'a run would resume' : 'resumed'} an interrupted backfill with these arguments`);
  lines.push(
    result.dryRun
      ? '  dry run: nothing changed'
      : result.status === 'completed'
        ? '  completed; a running service sends the payloads after those already waiting for the webhook'
        : '  interrupted: run the same command again to resume',
  );
  return lines.join('\n');
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
    .action(
      async (options: {
        webhook: string;
        asset?: string[];
        dryRun?: boolean;
        json?: boolean;
        databaseUrl?: string;
        config?: string;
      }) => {
        const { config, webhook } = await loadConfiguredWebhook(options.config, options.webhook);
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
        const dryRun = options.dryRun === true;
        // The first signal stops after the write in progress commits; a second ends the process at once.
        const stop = stopOnSignals('backfill', 'stopping after the current chunk commits');
        let printed = 0;
        const result = await withDatabase(options.databaseUrl, async (pool) => {
          // in_trash too: a backfill sends only assets that are not in the Trash.
          await assertBinding(pool, BINDING_VIEW_COLUMNS);
          const {
            rows: [known],
          } = await pool.query<{ enabled: boolean }>(
            'select enabled from asset_webhooks.webhooks where webhook_id = $1',
            [webhook.id],
          );
          if (!dryRun && known?.enabled !== true) {
            process.stderr.write(
              `warning: webhook ${webhook.id} ${known === undefined ? 'has not been run by the service' : 'is disabled in the running service'}: ` +
                'its payloads wait until a service runs with it enabled, and expire after retry.deadLetterAfterSeconds\n',
            );
          }
          return backfill({
            pool,
            webhook,
            maxPayloadBytes: config.assetUpdater.maxPayloadBytes,
            assetIds: options.asset,
            dryRun,
            signal: stop.signal,
            onProgress: (progress) => {
              if (Math.floor(progress.assetsRead / PROGRESS_EVERY) > printed) {
                printed = Math.floor(progress.assetsRead / PROGRESS_EVERY);
                process.stderr.write(`${progressLine(webhook.id, progress, dryRun)}\n`);
              }
            },
          });
        }).finally(() => stop.release());
        const maxRssBytes = process.resourceUsage().maxRSS * 1024;
        process.stdout.write(
          `${options.json ? JSON.stringify({ ...result, maxRssBytes }) : summary(printableValues(result))}\n`,
        );
        if (result.status !== 'completed' && !dryRun) {
          process.stderr.write(
            `backfill ${result.backfillId} of webhook ${result.webhookId}: interrupted, done up to asset ${result.lastAssetId ?? '(none)'}; ` +
              'run the same command again to resume\n',
          );
        }
        // Interrupted by a signal: 130 or 143, never 1, which says the command was given something wrong.
        if (result.status !== 'completed' && (stop.exitCode !== undefined || !dryRun))
          process.exitCode = stop.exitCode ?? 1;
      },
    );
}
