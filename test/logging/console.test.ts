import { PassThrough } from 'node:stream';
import { expect, it } from 'vitest';
import { routeConsoleTo } from '../../src/logging/console.js';
import { createLogger } from '../../src/logging/logger.js';

it('turns what dependencies write to the console into JSON log lines at a matching level, and puts the console back', () => {
  const sink = new PassThrough();
  const logger = createLogger({ level: 'debug', destination: sink });
  const before = { error: console.error, trace: console.trace };
  const restore = routeConsoleTo(logger);
  expect(console.error).not.toBe(before.error);
  try {
    console.error(
      'completeJobs: attempt %d/%d failed; retrying after %sms. Error: %s',
      1,
      5,
      '250',
      new Error('Connection terminated'),
    );
    console.warn('a warning');
    console.log('a line');
    console.trace('Worker exited with error');
  } finally {
    restore();
  }
  const lines = String(sink.read())
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { level: number; msg: string; source: string });
  expect(lines.map(({ level, source }) => ({ level, source }))).toEqual([
    { level: 50, source: 'console' },
    { level: 40, source: 'console' },
    { level: 30, source: 'console' },
    { level: 20, source: 'console' },
  ]);
  expect(lines[0]!.msg).toMatch(
    /^completeJobs: attempt 1\/5 failed; retrying after 250ms\. Error: Error: Connection terminated/,
  );
  expect(lines[3]!.msg).toBe('Worker exited with error');
  // Restored: the console writes to the process's own streams again.
  expect({ error: console.error, trace: console.trace }).toEqual(before);
});
