import { Command, CommanderError } from 'commander';
import { UserError } from '../errors.js';
import { printable } from '../text/printable.js';
import { packageVersion } from '../version.js';
import { commandNameOf } from './early-signals.js';
import { UsageError } from './usage-error.js';

type Register = (program: Command) => void;

/**
 * Each command's module, loaded only when that command runs (or for the
 * help, which lists them all), so a command pays its own imports alone:
 * `check-config` does not load the service, the database driver and the
 * HTTP client that `run` needs. In the order the help lists them.
 */
const COMMANDS: ReadonlyArray<{ readonly names: readonly string[]; readonly load: () => Promise<Register> }> = [
  { names: ['migrate'], load: async () => (await import('./commands/migrate.js')).registerMigrate },
  { names: ['run'], load: async () => (await import('./commands/run.js')).registerRun },
  { names: ['check-config'], load: async () => (await import('./commands/check-config.js')).registerCheckConfig },
  { names: ['explain'], load: async () => (await import('./commands/explain.js')).registerExplain },
  {
    names: ['trace', 'events', 'dead-letters'],
    load: async () => (await import('./commands/investigate.js')).registerInvestigation,
  },
  { names: ['resume'], load: async () => (await import('./commands/resume.js')).registerResume },
  { names: ['backfill'], load: async () => (await import('./commands/backfill.js')).registerBackfill },
  { names: ['reconcile'], load: async () => (await import('./commands/reconcile.js')).registerReconcile },
  { names: ['mirror'], load: async () => (await import('./commands/mirror.js')).registerMirror },
  { names: ['demo'], load: async () => (await import('./commands/demo.js')).registerDemo },
];

/**
 * Builds the command line. Each command lives in its own file under
 * commands/. Given the name of the command to run, only that command is
 * registered; otherwise (no command, the help, a name that is no command)
 * every one is.
 */
export async function buildProgram(commandName?: string): Promise<Command> {
  const program = new Command('asset-webhooks')
    .description('Outbound webhooks for asset changes: a transactional outbox in the asset PostgreSQL database.')
    .version(packageVersion(), '--version', 'print the version and exit')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  const named = COMMANDS.find((command) => commandName !== undefined && command.names.includes(commandName));
  for (const register of await Promise.all((named ? [named] : COMMANDS).map((command) => command.load()))) {
    register(program);
  }
  return program;
}

/**
 * Runs the command line and returns the exit status: 0 success, 1 a user error
 * (one line per problem on stderr), 2 bad usage.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = await buildProgram(commandNameOf(argv));
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through here with exit code 0.
      return error.exitCode === 0 ? 0 : 2;
    }
    if (error instanceof UsageError) {
      process.stderr.write(`error: ${printable(error.message)}\n(run with --help for usage)\n`);
      return 2;
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
