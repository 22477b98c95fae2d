import { Command, CommanderError } from 'commander';
import { UserError } from '../errors.js';
import { registerMigrate } from './commands/migrate.js';
import { registerRun } from './commands/run.js';
import { registerDemo } from './commands/demo.js';
import { registerCheckConfig } from './commands/check-config.js';
import { registerExplain } from './commands/explain.js';
import { registerInvestigation } from './commands/investigate.js';
import { registerBackfill } from './commands/backfill.js';
import { printable } from '../text/printable.js';

/** Builds the command line. Each command lives in its own file under commands/. */
export function buildProgram(): Command {
  const program = new Command('asset-webhooks')
    .description('Outbound webhooks for asset changes: a transactional outbox in the asset PostgreSQL database.')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  registerMigrate(program);
  registerRun(program);
  registerCheckConfig(program);
  registerExplain(program);
  registerInvestigation(program);
  registerBackfill(program);
  registerDemo(program);
  return program;
}

/**
 * Runs the command line and returns the exit status: 0 success, 1 a user error
 * (one line per problem on stderr), 2 bad usage.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through here with exit code 0.
      return error.exitCode === 0 ? 0 : 2;
    }
    if (error instanceof UserError) {
      // One line each: a value quoted in a problem cannot start a line of its own nor act on the terminal.
      for (const problem of error.problems) process.stderr.write(`${printable(problem)}\n`);
      return 1;
    }
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`${text.split('\n').map(printable).join('\n')}\n`);
    return 1;
  }
}
