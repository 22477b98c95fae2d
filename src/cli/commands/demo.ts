import type { Command } from 'commander';
import { requireDatabaseUrl } from '../../db/connect.js';
import { parseIntegerOption } from '../options.js';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description(
      'The whole service on an embedded PostgreSQL with local receivers and simulated asset activity. Ctrl-C stops it.',
    )
    .option('--duration <seconds>', 'end by itself after this many seconds', parseIntegerOption('--duration', 1, 86400))
    // Not DATABASE_URL: `npm run demo` stays on its own embedded server even where that names a real database.
    .option(
      '--database-url <url>',
      "run in this empty database instead of an embedded one; the demo's tables stay there",
    )
    .action(async (options: { duration?: number; databaseUrl?: string }) => {
      // Loaded on demand: only the demo needs its receivers and activity simulator.
      const { runDemo } = await import('../../demo/demo.js');
      await runDemo({
        durationSeconds: options.duration,
        databaseUrl: options.databaseUrl === undefined ? undefined : requireDatabaseUrl(options.databaseUrl),
      });
    });
}
