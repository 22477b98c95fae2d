import { constants } from 'node:os';
import { takeEarlySignals } from './early-signals.js';

type StopSignal = 'SIGINT' | 'SIGTERM';

/**
 * The exit status of a command stopped by `signal`: 128 and the signal's
 * number, as a shell reports a process the signal ended (SIGINT 130, SIGTERM
 * 143), so a supervisor or a script tells an interrupted command from one
 * that failed (1) or was misused (2).
 */
export function exitCodeOf(signal: StopSignal): number {
  return 128 + constants.signals[signal];
}

export interface StopSignals {
  /** Aborted at the first SIGINT or SIGTERM. */
  readonly signal: AbortSignal;
  /** 130 or 143 once the first signal has arrived (of that signal); undefined before. */
  readonly exitCode: number | undefined;
  /** Removes the handlers, for when the command ends first. */
  release(): void;
}

/**
 * SIGINT and SIGTERM for a command that stops cleanly (migrate, backfill,
 * reconcile): the first aborts the returned signal, says on stderr what the
 * command does now (`stopping`) and calls `onStop` with the exit status
 * the command ends with (130 or 143); a second ends the process
 * at once with 130 or 143. The handlers stay until `release`, since Node's
 * default action is no fallback: a process that is PID 1 (in a container)
 * has none, and would ignore every signal but SIGKILL. Signals that arrived
 * while the command line was loading (bufferEarlySignals) are taken first.
 */
export function stopOnSignals(command: string, stopping: string, onStop?: (exitCode: number) => void): StopSignals {
  const abort = new AbortController();
  let first: StopSignal | undefined;
  const handle = (signal: StopSignal): void => {
    if (first !== undefined) {
      process.stderr.write(`${command}: ${signal} again: stopping at once\n`);
      process.exit(exitCodeOf(signal));
    }
    first = signal;
    process.stderr.write(`${command}: ${signal}: ${stopping} (${signal} again to stop at once)\n`);
    abort.abort();
    onStop?.(exitCodeOf(signal));
  };
  const onInt = (): void => handle('SIGINT');
  const onTerm = (): void => handle('SIGTERM');
  process.on('SIGINT', onInt).on('SIGTERM', onTerm);
  for (const early of takeEarlySignals()) if (early === 'SIGINT' || early === 'SIGTERM') handle(early);
  return {
    signal: abort.signal,
    get exitCode() {
      return first === undefined ? undefined : exitCodeOf(first);
    },
    release() {
      process.removeListener('SIGINT', onInt).removeListener('SIGTERM', onTerm);
    },
  };
}
