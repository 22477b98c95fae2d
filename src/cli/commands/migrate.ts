import type { Command } from 'commander';
import { withDatabase } from '../database.js';
import { migrate } from '../../migrate/migrate.js';
import { printable } from '../../text/printable.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description("Create or upgrade the service's schema asset_webhooks and graphile-worker's schema. Idempotent.")
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--binding <reference|FILE>', 'also install the reference asset schema, or run a binding SQL file')
    .action(async (options: { databaseUrl?: string; binding?: string }) => {
      const result = await withDatabase(
        options.databaseUrl,
        (pool, databaseUrl) => migrate(pool, databaseUrl, { binding: options.binding }),
        { schema: false },
      );
      const applied = result.applied.length ? `applied ${result.applied.join(', ')}` : 'already up to date';
      process.stdout.write(
        `schema asset_webhooks at version ${result.schemaVersion} (${applied}), functions ${result.functionsDigest}` +
          (result.binding ? `; binding ${result.binding} installed` : '') +
          '\n',
      );
      for (const gap of result.captureGaps ?? []) process.stderr.write(`migrate: warning: ${printable(gap)}\n`);
    });
}
