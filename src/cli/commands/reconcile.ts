import type { Command } from 'commander';
import { loadConfiguredWebhook } from '../../config/load.js';
import { UserError } from '../../errors.js';
import { BINDING_VIEW_COLUMNS } from '../../db/asset-state.js';
import { assertBinding } from '../../migrate/binding-check.js';
import { reconcile, type ReconcileProgress, type ReconcileResult } from '../../mirror/reconcile.js';
import { checksDifferFromRouting } from '../../mirror/routed-checks.js';
import { withDatabase } from '../database.js';
import { stopOnSignals } from '../stop-signals.js';
import { printableValues } from '../../text/printable.js';

function progressLine(webhookId: string, progress: ReconcileProgress, dryRun: boolean): string {
  const name = progress.reconcileId === null ? 'reconcile' : `reconcile ${progress.reconcileId}`;
  const would = dryRun ? 'would be sent' : 'sent';
  return (
    `${dryRun ? 'dry run of ' : ''}${name} of webhook ${webhookId}: ${progress.assetsRead} assets read, ` +
    `${progress.editedSent} EDITED and ${progress.unmatchedSent} UNMATCHED ${would} in ${progress.payloads} payloads` +
    (progress.phase === 'gone' ? ' (now: members whose asset is gone)' : '')
  );
}

function summary(result: ReconcileResult): string {
  const lines = [progressLine(result.webhookId, result, result.dryRun)];
  if (result.resumed) lines.push(`  ${result.dryRun ? 'a run would resume' : 'resumed'} an interrupted reconcile`);
  lines.push(
    result.dryRun
      ? '  dry run: nothing changed'
      : result.status === 'completed'
        ? "  completed: the webhook's set is what its checks give now; a running service sends the payloads in order"
        : '  interrupted: run the same command again to resume',
  );
  return lines.join('\n');
}

/** `reconcile`: a mirror webhook's set made what its checks give now (docs/mirror.md). */
export function registerReconcile(program: Command): void {
  program
    .command('reconcile')
    .description(
      "Make a mirror webhook's set of announced assets what its checks give now: an EDITED with a new eventId for every asset " +
        'that passes them, is not in the Trash and is not in the set, and an UNMATCHED for every asset of the set that no longer ' +
        'passes them or no longer exists. Interrupted, the same command resumes without sending an asset twice. Progress on stderr.',
    )
    .requiredOption('--webhook <id>', 'the webhook, as configured (with mirror: true)')
    .option('--dry-run', 'count what would be sent, change nothing')
    .option('--json', 'machine-readable result on stdout')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--config <file>', 'configuration document (default: env ASSET_WEBHOOKS_CONFIG)')
    .action(
      async (options: { webhook: string; dryRun?: boolean; json?: boolean; databaseUrl?: string; config?: string }) => {
        const { config, webhook } = await loadConfiguredWebhook(options.config, options.webhook);
        if (!webhook.mirror)
          throw new UserError(
            'webhook_not_mirror',
            `--webhook: expected a webhook with mirror: true, got ${webhook.id}, which keeps no set to reconcile (use backfill to send its assets)`,
          );
        if (!webhook.enabled)
          throw new UserError(
            'webhook_disabled',
            `--webhook: expected an enabled webhook, got ${webhook.id}, which is disabled (enabled: false) and receives nothing`,
          );
        const dryRun = options.dryRun === true;
        // The first signal stops after the write in progress commits; a second ends the process at once.
        const stop = stopOnSignals('reconcile', 'stopping after the current chunk commits');
        let printed = 0;
        const result = await withDatabase(options.databaseUrl, async (pool) => {
          await assertBinding(pool, BINDING_VIEW_COLUMNS);
          const routedAt = await checksDifferFromRouting(pool, webhook);
          if (routedAt !== undefined) {
            process.stderr.write(
              `reconcile: warning: webhook ${webhook.id}: its checks in this document (resource types, event types, filters) ` +
                `differ from those the service last routed it by (at ${routedAt.toISOString()}): this reconcile sends the set ` +
                "of this document's checks, which the service's next coalescing runs reverse; reconcile with the service's document, " +
                'or load this one into the service first (its reload reconciles by itself)\n',
            );
          }
          return reconcile({
            pool,
            webhook,
            maxPayloadBytes: config.assetUpdater.maxPayloadBytes,
            dryRun,
            signal: stop.signal,
            onProgress: (progress) => {
              if (Math.floor(progress.assetsRead / 10_000) > printed) {
                printed = Math.floor(progress.assetsRead / 10_000);
                process.stderr.write(`${progressLine(webhook.id, progress, dryRun)}\n`);
              }
            },
          });
        }).finally(() => stop.release());
        process.stdout.write(`${options.json ? JSON.stringify(result) : summary(printableValues(result))}\n`);
        // Interrupted by a signal: 130 or 143, never 1, which says the command was given something wrong.
        if (result.status !== 'completed' && (stop.exitCode !== undefined || !dryRun))
          process.exitCode = stop.exitCode ?? 1;
      },
    );
}
