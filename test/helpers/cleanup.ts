import { afterEach } from 'vitest';
import type { CliProcess } from './cli.js';

/** Something a test opened that must be closed after it: a receiver, a server, a proxy. */
export interface Closable {
  close(): Promise<void>;
}

export interface Cleanup {
  /** Ends the process after the test (SIGKILL unless it has exited) and waits for its exit; returns it. */
  process<T extends CliProcess>(started: T): T;
  /** Closes it after the test, once every process is gone; returns it. */
  close<T extends Closable>(opened: T): T;
}

/**
 * Ends, after each test, what the test handed to it: first every process,
 * killed and waited for, so none is left delivering to a port about to close;
 * then every receiver or server, closed. A test that wants a graceful stop
 * stops the process itself first. One failing close does not keep the others
 * open: all are tried, then the first error is thrown. Call once per file, at
 * the top level (it registers an afterEach).
 */
export function useCleanup(): Cleanup {
  const processes: CliProcess[] = [];
  const closables: Closable[] = [];
  afterEach(async () => {
    const ending = processes.splice(0);
    for (const { child } of ending) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(ending.map((started) => started.exited));
    const results = await Promise.allSettled(closables.splice(0).map((opened) => opened.close()));
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  });
  return {
    process: (started) => {
      processes.push(started);
      return started;
    },
    close: (opened) => {
      closables.push(opened);
      return opened;
    },
  };
}
