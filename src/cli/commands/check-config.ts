import type { Command } from 'commander';
import { configFromEnvOrOption, loadConfigFile } from '../../config/load.js';
import { configWarnings } from '../../config/warnings.js';
import { printable, quotedPrefix } from '../../text/printable.js';

export function registerCheckConfig(program: Command): void {
  program
    .command('check-config [FILE]')
    .description('Validate a configuration document: exit 0 when valid, else exit 1 with one line per problem.')
    .option('--config <file>', 'configuration document (default: env ASSET_WEBHOOKS_CONFIG)')
    // Every command takes --database-url, so scripts can pass the same options to each; checking a document needs no database.
    .option('--database-url <url>', 'accepted for uniformity with the other commands; not used')
    .action(async (file: string | undefined, options: { config?: string }, command: Command) => {
      if (file !== undefined && options.config !== undefined && file !== options.config) {
        command.error(
          `--config: expected the same file as the argument ${quotedPrefix(file, 200)}, or only one of them, got ${quotedPrefix(options.config, 200)}`,
          { exitCode: 2, code: 'asset-webhooks.config-twice' },
        );
      }
      const path = file ?? configFromEnvOrOption(options.config);
      const config = await loadConfigFile(path);
      const webhooks = config.assetUpdater.webhooks;
      const paused = webhooks.filter((w) => w.enabled && w.paused).length;
      process.stdout.write(
        `${path}: valid, ${webhooks.length} webhook(s) (${webhooks.filter((w) => w.enabled).length} enabled` +
          `${paused > 0 ? `, ${paused} of them paused` : ''}): ` +
          `${webhooks.map((w) => w.id).join(', ') || 'none'}; interval ${config.assetUpdater.intervalSeconds}s\n`,
      );
      // Valid, so exit 0; what would fail every delivery is still said.
      for (const warning of configWarnings(config)) process.stderr.write(`${printable(warning)}\n`);
    });
}
