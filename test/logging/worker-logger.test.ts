import { PassThrough } from 'node:stream';
import { expect, it } from 'vitest';
import { createLogger } from '../../src/logging/logger.js';
import { workerLogger } from '../../src/logging/worker-logger.js';

/** An error with the `code` pg or Node gives it. */
function coded(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

// What graphile-worker passes with its error lines, as pg and Node make them.
const adminShutdown = coded('terminating connection due to administrator command', '57P01');
const refused = coded('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED');
const notQueryable = new Error('Client has encountered a connection error and is not queryable');
const syntaxError = coded('syntax error at or near "selec"', '42601');

it.each([
  {
    what: 'a notify listener whose session the server ended',
    level: 'error',
    meta: { error: adminShutdown },
    expected: 40,
  },
  { what: 'a refused reconnection', level: 'error', meta: { error: refused }, expected: 40 },
  { what: 'an UNLISTEN on the lost session', level: 'error', meta: { error: notQueryable }, expected: 40 },
  {
    what: 'a job failed because its connection was lost',
    level: 'error',
    meta: { failure: true, error: refused },
    expected: 40,
  },
  {
    what: 'a connection error wrapped as the cause',
    level: 'error',
    meta: { error: new Error('task failed', { cause: refused }) },
    expected: 40,
  },
  { what: 'an error of a statement', level: 'error', meta: { error: syntaxError }, expected: 50 },
  { what: 'an error line without meta', level: 'error', meta: undefined, expected: 50 },
  { what: 'an error that is not an Error', level: 'error', meta: { error: 'connect ECONNREFUSED' }, expected: 50 },
  // A worker that cannot release its job stops; graphile-worker passes that error as `fatalError`.
  { what: 'a fatal error, even one of the connection', level: 'error', meta: { fatalError: refused }, expected: 50 },
  { what: 'a warning', level: 'warning', meta: undefined, expected: 40 },
  { what: 'an info line', level: 'info', meta: undefined, expected: 20 },
  { what: 'a debug line', level: 'debug', meta: { error: syntaxError }, expected: 10 },
] as const)('logs graphile-worker reporting $what at pino level $expected', ({ level, meta, expected }) => {
  const sink = new PassThrough();
  const logger = workerLogger(createLogger({ level: 'trace', destination: sink }));
  logger[level === 'warning' ? 'warn' : level]('the message', meta);
  const line = JSON.parse(String(sink.read())) as { level: number; msg: string; component: string };
  expect(line).toMatchObject({ level: expected, msg: 'the message', component: 'graphile-worker' });
});

it("keeps the message and code of graphile-worker's errors in the line", () => {
  const sink = new PassThrough();
  const logger = workerLogger(createLogger({ level: 'trace', destination: sink }));
  logger.error('Failed task', { error: syntaxError, fatalError: refused, job: 7 });
  const line = JSON.parse(String(sink.read())) as Record<string, unknown>;
  expect(line).toMatchObject({
    error: 'syntax error at or near "selec" (42601)',
    fatalError: 'connect ECONNREFUSED 127.0.0.1:5432',
    job: 7,
  });
});
