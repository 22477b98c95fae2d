import type { Command } from 'commander';
import type pg from 'pg';
import type { WebhookConfig } from '../../config/schema.js';
import { UserError } from '../../errors.js';
import { reconcile, type ReconcileProgress, type ReconcileResult } from '../../mirror/reconcile.js';
import { checksDifferFromRouting } from '../../mirror/routed-checks.js';
import { runSweepCommand, type SweepCommandOptions } from '../sweep-command.js';

function progressLine(webhookId: string, progress: ReconcileProgress, dryRun: boolean): string {
  const name = progress.reconcileId === null ? 'reconcile' : `reconcile ${progress.reconcileId}`;
  const would = dryRun ? 'would be sent' : 'sent';
  return (
    `${dryRun ? 'dry run of ' : ''}${name} of webhook ${webhookId}: ${progress.assetsRead} assets read, ` +
    `${progress.editedSent} EDITED and ${progress.unmatchedSent} UNMATCHED ${would} in ${progress.payloads} payloads` +
    (progress.phase === 'gone' ? ' (now: members whose asset is gone)' : '')
  );
}

/** Refuses a webhook that is not an enabled mirror webhook: it keeps no set to reconcile. */
function assertReconcilable(webhook: WebhookConfig): void {
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
}

/** Warns when the service routes the webhook by other checks than this document's: its next runs would undo this set. */
async function warnOfOtherChecks(pool: pg.Pool, webhook: WebhookConfig): Promise<void> {
  const routedAt = await checksDifferFromRouting(pool, webhook);
  if (routedAt === undefined) return;
  process.stderr.write(
    `reconcile: warning: webhook ${webhook.id}: its checks in this document (resource types, event types, filters) ` +
      `differ from those the service last routed it by (at ${routedAt.toISOString()}): this reconcile sends the set ` +
      "of this document's checks, which the service's next coalescing runs reverse; reconcile with the service's document, " +
      'or load this one into the service first (its reload reconciles by itself)\n',
  );
}

function reconcileCommand(options: SweepCommandOptions): Promise<void> {
  return runSweepCommand<ReconcileProgress, ReconcileResult>(options, {
    kind: 'reconcile',
    refuse: assertReconcilable,
    warn: warnOfOtherChecks,
    sweep: (context) => reconcile(context),
    progressLine,
    details: () => [],
    resumedWhat: 'an interrupted reconcile',
    completedLine:
      "completed: the webhook's set is what its checks give now; a running service sends the payloads in order",
  });
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
    .action(reconcileCommand);
}
