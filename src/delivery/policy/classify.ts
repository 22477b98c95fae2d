import type { PostResult } from '../http/sender.js';

/**
 * What an attempt's result means for the payload. `interrupted`: the attempt
 * has no result because its process stopped or died mid-request (set by crash
 * recovery, never by a response).
 */
export type Classification = 'delivered' | 'rejected' | 'retryable' | 'interrupted';

/**
 * The single place that maps an attempt's result to retry yes or no (the
 * outcome rules of docs/configuration.md and src/delivery/policy/next-state.ts):
 *
 * | result                                                   | classification |
 * |----------------------------------------------------------|----------------|
 * | status 200-299                                           | delivered      |
 * | status 400-499 listed in retry.retryStatusCodes          | retryable      |
 * | status 400-499 otherwise                                 | rejected (never retried) |
 * | status 100-199, 300-399 (redirects are not followed), 500-599, 600 and up | retryable |
 * | any transport error: timeout, refused or reset connection, DNS, TLS, refused address, an API key that could not be resolved | retryable |
 *
 * `retryStatusCodes` defaults to none, which is the specification's rule:
 * every 4xx is rejected.
 */
export function classifyResponse(result: PostResult, retryStatusCodes: readonly number[] = []): Classification {
  if (result.kind !== 'response') return 'retryable';
  if (result.statusCode >= 200 && result.statusCode <= 299) return 'delivered';
  if (result.statusCode >= 400 && result.statusCode <= 499)
    return retryStatusCodes.includes(result.statusCode) ? 'retryable' : 'rejected';
  return 'retryable';
}
