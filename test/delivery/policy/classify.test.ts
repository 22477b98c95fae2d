import { describe, expect, it } from 'vitest';
import type { ErrorClass, PostResult } from '../../../src/delivery/http/sender.js';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';

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
