/**
 * Signals that reach `run` while the command line is still loading its
 * modules, before the command can install its own
 * handlers. Node's default for SIGTERM, SIGINT and SIGHUP is to end the
 * process at once; a configuration tool's SIGHUP to every `run` process, or a
 * stop during a restart, must not do that. The entry point buffers them, and
 * `run` takes them once its handlers are in place.
 *
 * Only for `run`: a command that never takes them would ignore Ctrl-C.
 */
const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
const received: NodeJS.Signals[] = [];
const record = (signal: NodeJS.Signals): void => {
  received.push(signal);
};

export function bufferEarlySignals(): void {
  for (const signal of SIGNALS) process.on(signal, record);
}

/** Stops buffering; returns what arrived, in order. */
export function takeEarlySignals(): NodeJS.Signals[] {
  for (const signal of SIGNALS) process.removeListener(signal, record);
  return received.splice(0);
}

/**
 * The command a command line names: its first argument that is not an
 * option. The entry point reads it before it loads anything (to buffer
 * signals for `run`), and main.ts to register only that command.
 */
export function commandNameOf(argv: readonly string[]): string | undefined {
  return argv.slice(2).find((arg) => !arg.startsWith('-'));
}
