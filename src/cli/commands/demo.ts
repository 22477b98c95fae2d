import type { Command } from 'commander';
import { parseIntegerOption } from '../options.js';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('The whole service on an embedded PostgreSQL with local receivers and simulated asset activity. Ctrl-C stops it.')
    .option('--duration <seconds>', 'end by itself after this many seconds', parseIntegerOption('--duration', 1, 86400))
    .action(async (options: { duration?: number }) => {
      // Loaded on demand: only the demo needs its receivers and activity simulator.
      const { runDemo } = await import('../../demo/demo.js');
      await runDemo({ durationSeconds: options.duration });
    });
}
