import type { Command } from 'commander';
import { withDatabase } from '../database.js';
import { PoolSessions } from '../pool-sessions.js';
import { stopOnSignals } from '../stop-signals.js';
import { migrate, type MigrateResult } from '../../migrate/migrate.js';
import { printable } from '../../text/printable.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description("Create or upgrade the service's schema asset_webhooks and graphile-worker's schema. Idempotent.")
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--binding <reference|FILE>', 'also install the reference asset schema, or run a binding SQL file')
    .action(async (options: { databaseUrl?: string; binding?: string }) => {
      // The first signal ends the command's sessions, so the server rolls back the
      // transaction under way; each migration commits with its bookkeeping row, so
      // what committed before it stays, and the next migrate goes on from there.
      const sessions = new PoolSessions();
      const stop = stopOnSignals('migrate', 'stopping: rolling back the transaction under way', (exitCode) => {
        // Not connected yet: nothing has changed, and nothing is waited for.
        if (!sessions.watching) process.exit(exitCode);
        void sessions.end().then((problem) => {
          if (problem === undefined) return;
          process.stderr.write(`migrate: could not end its sessions (${printable(problem)}): stopping at once\n`);
          process.exit(exitCode);
        });
      });
      let result: MigrateResult;
      try {
        result = await withDatabase(
          options.databaseUrl,
          (pool, databaseUrl) => {
            sessions.watch(pool, databaseUrl);
            return migrate(pool, { binding: options.binding });
          },
          { schema: false },
        );
      } catch (error) {
        if (stop.exitCode === undefined) throw error;
        process.stderr.write(
          'migrate: stopped: the transaction under way was rolled back; the migrations committed before it stay, ' +
            'and migrate run again goes on from there\n',
        );
        process.exitCode = stop.exitCode;
        return;
      } finally {
        stop.release();
      }
      const applied = result.applied.length ? `applied ${result.applied.join(', ')}` : 'already up to date';
      process.stdout.write(
        `schema asset_webhooks at version ${result.schemaVersion} (${applied}), functions ${result.functionsDigest}` +
          (result.binding ? `; binding ${result.binding} installed` : '') +
          '\n',
      );
      for (const gap of result.captureGaps ?? []) process.stderr.write(`migrate: warning: ${printable(gap)}\n`);
    });
}
