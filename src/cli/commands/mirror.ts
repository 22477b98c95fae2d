import type { Command } from 'commander';
import { loadConfiguredWebhook } from '../../config/load.js';
import { UserError } from '../../errors.js';
import { mirrorDigest } from '../../mirror/digest.js';
import { withDatabase } from '../database.js';

interface DigestOptions {
  readonly webhook: string;
  readonly json?: boolean;
  readonly databaseUrl?: string;
  readonly config?: string;
}

async function digestCommand(options: DigestOptions): Promise<void> {
  const { webhook } = await loadConfiguredWebhook(options.config, options.webhook);
  if (!webhook.mirror)
    throw new UserError(
      'webhook_not_mirror',
      `--webhook: expected a webhook with mirror: true, got ${webhook.id}, which keeps no set to digest`,
    );
  const digest = await withDatabase(options.databaseUrl, (pool) => mirrorDigest(pool, webhook.id));
  process.stdout.write(
    options.json
      ? `${JSON.stringify(digest)}\n`
      : `webhook ${digest.webhookId}: ${digest.count} assets in its set, digest sha256:${digest.digest}\n`,
  );
}

/** `mirror digest`: a mirror webhook's set summed up, for a receiver to compare its copy with (docs/mirror.md). */
export function registerMirror(program: Command): void {
  const mirror = program.command('mirror').description('Mirror webhooks: the set of assets each one was told about.');
  mirror
    .command('digest')
    .description(
      "Print the number of assets in a mirror webhook's set and the SHA-256 of its lines `assetId<TAB>eventTimestamp<LF>` " +
        '(the eventTimestamp of the last event sent for the asset), sorted by assetId as bytes: docs/mirror.md shows a ' +
        'receiver the same computation over its copy.',
    )
    .requiredOption('--webhook <id>', 'the webhook, as configured (with mirror: true)')
    .option('--json', 'machine-readable output: {"webhookId", "count", "digest"}')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--config <file>', 'configuration document (default: env ASSET_WEBHOOKS_CONFIG)')
    .action(digestCommand);
}
