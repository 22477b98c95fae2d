import { describe, expect, it } from 'vitest';
import type { ErrorClass, PostResult } from '../../../src/delivery/http/sender.js';
import { isLocalFault } from '../../../src/delivery/local-fault.js';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { receiverFailed } from '../../../src/delivery/policy/next-state.js';

const response = (statusCode: number): PostResult => ({
  kind: 'response',
  statusCode,
  durationMs: 1,
  responseExcerpt: '',
});
const failure = (errorClass: ErrorClass): PostResult => ({ kind: 'error', errorClass, message: 'm', durationMs: 1 });

describe('classifying a status code (the pure table; test/delivery/http/status-table.test.ts runs it against a real server)', () => {
  it.each([
    [100, 'retryable'],
    [101, 'retryable'],
    [103, 'retryable'],
    [199, 'retryable'],
    [200, 'delivered'],
    [201, 'delivered'],
    [202, 'delivered'],
    [204, 'delivered'],
    [299, 'delivered'],
    [300, 'retryable'],
    [301, 'retryable'],
    [302, 'retryable'],
    [304, 'retryable'],
    [307, 'retryable'],
    [308, 'retryable'],
    [399, 'retryable'],
    [400, 'rejected'],
    [401, 'rejected'],
    [403, 'rejected'],
    [404, 'rejected'],
    [410, 'rejected'],
    [413, 'rejected'],
    [429, 'rejected'],
    [499, 'rejected'],
    [500, 'retryable'],
    [502, 'retryable'],
    [503, 'retryable'],
    [504, 'retryable'],
    [599, 'retryable'],
    [600, 'retryable'],
    [999, 'retryable'],
  ] as const)('status %i is %s', (status, expected) => {
    expect(classifyResponse(response(status))).toBe(expected);
  });
});

describe('retry.disableOnGone: a 410 suspends the webhook', () => {
  it.each([
    [410, false, [], 'rejected'],
    [410, true, [], 'gone'],
    [410, true, [410], 'gone'],
    [410, false, [410], 'retryable'],
    [404, true, [], 'rejected'],
    [429, true, [429], 'retryable'],
    [200, true, [], 'delivered'],
    [500, true, [], 'retryable'],
  ] as const)(
    'status %i with disableOnGone %s and retryStatusCodes %j is %s',
    (status, disableOnGone, codes, expected) => {
      expect(classifyResponse(response(status), codes, disableOnGone)).toBe(expected);
    },
  );

  it('says nothing of the receiver health: no standby replaces it, and the webhook is not backing off', () => {
    expect(receiverFailed('gone')).toBeNull();
  });
});

describe('classifying a transport failure', () => {
  it.each([
    'timeout',
    'connection_refused',
    'connection_reset',
    'dns',
    'tls',
    'address_refused',
    'invalid_url',
    'invalid_response',
    'invalid_request',
    'secret_unavailable',
    'other',
  ] as const)('%s is retryable', (errorClass) => {
    expect(classifyResponse(failure(errorClass))).toBe('retryable');
  });
});

describe('a local fault: this process out of file descriptors or memory', () => {
  it('is its own classification, not a failure of the receiver', () => {
    expect(classifyResponse(failure('local_fault'))).toBe('local_fault');
    expect(receiverFailed('local_fault')).toBeNull();
  });

  it.each([
    ['EMFILE', Object.assign(new Error('connect EMFILE 127.0.0.1:80'), { code: 'EMFILE' })],
    ['ENFILE in a cause', new TypeError('fetch failed', { cause: Object.assign(new Error('x'), { code: 'ENFILE' }) })],
    ['ENOMEM', Object.assign(new Error('spawn ENOMEM'), { code: 'ENOMEM' })],
    ['ENOBUFS', Object.assign(new Error('write ENOBUFS'), { code: 'ENOBUFS' })],
    ['an allocation failure', new RangeError('Array buffer allocation failed')],
    ['one of several errors', new AggregateError([new Error('a'), Object.assign(new Error('b'), { code: 'EMFILE' })])],
  ])('%s is one', (_name, error) => {
    expect(isLocalFault(error)).toBe(true);
  });

  it.each([
    ['ECONNREFUSED', Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })],
    ['a RangeError of another kind', new RangeError('Invalid time value')],
    ['a string', 'EMFILE'],
    ['null', null],
  ])('%s is not', (_name, error) => {
    expect(isLocalFault(error)).toBe(false);
  });
});
