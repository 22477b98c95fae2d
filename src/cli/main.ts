import { Command, CommanderError } from 'commander';
import { UserError } from '../errors.js';
import { printable, quotedPrefix } from '../text/printable.js';
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
  { names: ['replay'], load: async () => (await import('./commands/replay.js')).registerReplay },
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
    // Commander's errors are written by main(), one line each (usageLine):
    // its own output would put a suggestion and the help hint on lines of their own.
    .configureOutput({ outputError: () => undefined })
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
      // --help and --version end through here with exit code 0; a command
      // group given no command has had its help written (to stderr) already.
      if (error.exitCode === 0) return 0;
      if (error.code !== 'commander.help') process.stderr.write(`${usageLine(error.message)}\n`);
      return 2;
    }
    if (error instanceof UsageError) {
      process.stderr.write(`${usageLine(error.message)}\n`);
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

/** A name commander quotes in its messages ('--option', 'command', the arguments): longer ones are cut. */
const COMMANDER_QUOTED = /'([^'\n]*)'/g;
/** Characters of a usage line before the hint: commander lists excess arguments unquoted, whole. */
const MAX_USAGE_LINE = 400;

/**
 * Bad usage as one line (CONTRACT: one line per problem), starting with
 * `error: ` as commander's own messages do: commander's "(Did you mean
 * ...?)" on the same line, what it quotes of the command line cut to a
 * prefix (a file pasted as an option name), escaped for the terminal, and
 * the hint.
 */
export function usageLine(message: string): string {
  const quoted = message.replace(COMMANDER_QUOTED, (whole, name: string) =>
    name.length > 40 ? quotedPrefix(name) : whole,
  );
  const lines = quoted
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const text = printable(lines.join(' ').replace(/^(?!error: )/, 'error: '));
  return `${text.length > MAX_USAGE_LINE ? `${text.slice(0, MAX_USAGE_LINE)}...` : text} (run with --help for usage)`;
}
