import type { Command } from 'commander';
import { renderResume, resumeWebhook } from '../../investigate/resume-gone.js';
import { printable } from '../../text/printable.js';
import { withDatabase } from '../database.js';

export function registerResume(program: Command): void {
  program
    .command('resume')
    .description(
      'End the suspension of a webhook by a 410 Gone answer (retry.disableOnGone): its waiting payloads, the one that ' +
        'got the 410 included, are sent again in order, none having expired meanwhile. A document that changes the ' +
        "webhook's url resumes it too.",
    )
    .requiredOption('--webhook <id>', 'webhook id')
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .action(async (options: { webhook: string; json?: boolean; databaseUrl?: string }) => {
      await withDatabase(options.databaseUrl, async (pool) => {
        const report = await resumeWebhook(pool, options.webhook);
        process.stdout.write(`${options.json ? JSON.stringify(report) : printable(renderResume(report))}\n`);
      });
    });
}
