/**
 * Signals that reach a command while the command line is still loading its
 * modules, before the command can install its own handlers. Node's default
 * for SIGTERM, SIGINT and SIGHUP is to end the process at once, and a process
 * that is PID 1 (in a container) has no default at all, so such a signal is
 * lost. `run` must not die of a configuration tool's SIGHUP or of a stop
 * during a restart; migrate, backfill, reconcile and replay must not lose a stop.
 * The entry point buffers them, and the command takes them once its handlers
 * are in place (run.ts, stop-signals.ts).
 *
 * Only for the commands that take them: any other would ignore Ctrl-C.
 */
const BUFFERED: Readonly<Record<string, readonly NodeJS.Signals[]>> = {
  run: ['SIGTERM', 'SIGINT', 'SIGHUP'],
  migrate: ['SIGTERM', 'SIGINT'],
  backfill: ['SIGTERM', 'SIGINT'],
  reconcile: ['SIGTERM', 'SIGINT'],
  replay: ['SIGTERM', 'SIGINT'],
};
let buffering: readonly NodeJS.Signals[] = [];
const received: NodeJS.Signals[] = [];
const record = (signal: NodeJS.Signals): void => {
  received.push(signal);
};

/** Buffers the signals the command named by `argv` takes itself (none for the other commands). */
export function bufferEarlySignals(argv: readonly string[]): void {
  const command = commandNameOf(argv);
  buffering = (command !== undefined && Object.hasOwn(BUFFERED, command) ? BUFFERED[command] : undefined) ?? [];
  for (const signal of buffering) process.on(signal, record);
}

/** Stops buffering; returns what arrived, in order. */
export function takeEarlySignals(): NodeJS.Signals[] {
  for (const signal of buffering) process.removeListener(signal, record);
  buffering = [];
  return received.splice(0);
}

/**
 * The command a command line names: its first argument that is not an
 * option. The entry point reads it before it loads anything (to buffer
 * signals), and main.ts to register only that command.
 */
export function commandNameOf(argv: readonly string[]): string | undefined {
  return argv.slice(2).find((arg) => !arg.startsWith('-'));
}
