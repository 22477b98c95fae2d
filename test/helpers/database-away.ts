import { expect } from 'vitest';
import type { CliProcess } from './cli.js';
import { eventually } from './receiver.js';

/**
 * Waits until each of the process's periodic uses of the database has failed
 * and said so: the pump's claim (every second), its recovery and expiry sweep
 * (every 5 s) and the ticker of coalescing runs. Each failure is one a crash
 * would follow; the process must still be up after all of them.
 */
export async function untilFailedAndUp(proc: CliProcess): Promise<void> {
  for (const failure of [
    'could not claim payloads for delivery; trying again',
    'delivery recovery and expiry sweep failed; trying again',
    'could not schedule a coalescing run; trying again',
  ])
    await eventually(
      async () => {
        if (proc.child.exitCode !== null || proc.child.signalCode !== null)
          throw new Error(`the process ended while the database was away: ${proc.output.stderr.slice(-3000)}`);
        return proc.output.stderr.includes(failure) ? true : undefined;
      },
      { timeoutMs: 20_000, what: failure },
    );
  expect(proc.child.exitCode).toBeNull();
  expect(proc.child.signalCode).toBeNull();
}
