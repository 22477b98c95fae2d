import type { PostResult } from '../http/sender.js';

/**
 * What an attempt's result means for the payload. `interrupted`: the attempt
 * has no result because its process stopped or died mid-request (set by crash
 * recovery, never by a response). `local_fault`: this process ran out of file
 * descriptors or memory for the request (errorClass `local_fault`): no fault
 * of the receiver's. `gone`: a 410 with retry.disableOnGone on, which
 * suspends the webhook rather than ends the payload.
 */
export type Classification = 'delivered' | 'rejected' | 'retryable' | 'interrupted' | 'local_fault' | 'gone';

/**
 * The single place that maps an attempt's result to retry yes or no (the
 * outcome rules of docs/configuration.md and src/delivery/policy/next-state.ts):
 *
 * | result                                                   | classification |
 * |----------------------------------------------------------|----------------|
 * | status 200-299                                           | delivered      |
 * | status 410 with retry.disableOnGone true (whatever retryStatusCodes lists) | gone |
 * | status 400-499 listed in retry.retryStatusCodes          | retryable      |
 * | status 400-499 otherwise                                 | rejected (never retried) |
 * | status 100-199, 300-399 (redirects are not followed), 500-599           | retryable      |
 * | this process out of file descriptors or memory (errorClass local_fault) | local_fault |
 * | any other transport error: timeout, refused or reset connection, DNS, TLS, refused address, a status outside 100-599 (invalid_response), an API key that could not be resolved | retryable |
 *
 * `retryStatusCodes` defaults to none and `disableOnGone` to false, which is
 * the specification's rule: every 4xx is rejected.
 */
export function classifyResponse(
  result: PostResult,
  retryStatusCodes: readonly number[] = [],
  disableOnGone = false,
): Classification {
  if (result.kind !== 'response') return result.errorClass === 'local_fault' ? 'local_fault' : 'retryable';
  if (result.statusCode >= 200 && result.statusCode <= 299) return 'delivered';
  if (result.statusCode === 410 && disableOnGone) return 'gone';
  if (result.statusCode >= 400 && result.statusCode <= 499)
    return retryStatusCodes.includes(result.statusCode) ? 'retryable' : 'rejected';
  return 'retryable';
}
