import { describe, expect, it } from 'vitest';
import { isConnectionError } from '../../src/db/connect.js';

const withCode = (code: string, message = 'm'): Error => Object.assign(new Error(message), { code });

describe('every way a connection to the database fails is a lost connection', () => {
  it.each([
    ['ENOENT', 'a Unix socket whose server is down'],
    ['ENOTFOUND', 'a name that does not resolve during a failover'],
    ['EAI_AGAIN', 'a resolver that does not answer'],
    ['ECONNREFUSED', 'a server that is not listening'],
    ['ECONNRESET', 'a connection reset'],
    ['ECONNABORTED', 'a connection aborted'],
    ['EPIPE', 'a write to a closed connection'],
    ['ETIMEDOUT', 'a connect that timed out'],
    ['EHOSTUNREACH', 'a host that cannot be reached'],
    ['ENETUNREACH', 'a network that cannot be reached'],
    ['57P01', 'admin shutdown'],
    ['57P02', 'crash shutdown'],
    ['57P03', 'cannot connect now (starting up, shutting down)'],
    ['57P05', 'idle session timeout'],
    ['53300', 'too many connections'],
    ['08006', 'connection failure'],
    ['08003', 'connection does not exist'],
    ['08001', 'unable to establish a connection'],
  ])('%s (%s)', (code) => {
    expect(isConnectionError(withCode(code))).toBe(true);
  });

  it.each([
    'Connection terminated unexpectedly',
    'Connection terminated due to connection timeout',
    'Client has encountered a connection error and is not queryable',
    'Client was closed and is not queryable',
    'timeout exceeded when trying to connect',
  ])('pg\'s "%s"', (message) => {
    expect(isConnectionError(new Error(message))).toBe(true);
  });

  it('looks into AggregateError and cause', () => {
    expect(isConnectionError(new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')]))).toBe(true);
    expect(isConnectionError(new Error('query failed', { cause: withCode('ENOENT') }))).toBe(true);
  });

  it('is not a statement that was wrong', () => {
    expect(isConnectionError(withCode('42P01', 'relation does not exist'))).toBe(false);
    expect(isConnectionError(withCode('23505', 'duplicate key'))).toBe(false);
    expect(isConnectionError(withCode('40P01', 'deadlock detected'))).toBe(false);
    expect(isConnectionError('ECONNREFUSED')).toBe(false);
  });
});
