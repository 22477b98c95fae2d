import type { PostResult } from '../http/sender.js';

/** What an attempt's result means for the payload. */
export type Classification = 'delivered' | 'rejected' | 'retryable';

/**
 * The single place that maps an attempt's result to retry yes or no (spec
 * sections 3.2 and 7, CONTRACT section 5):
 *
 * | result                                                   | classification |
 * |----------------------------------------------------------|----------------|
 * | status 200-299                                           | delivered      |
 * | status 400-499                                           | rejected (never retried) |
 * | status 100-199, 300-399 (redirects are not followed), 500-599, 600 and up | retryable |
 * | any transport error: timeout, refused or reset connection, DNS, TLS, refused address, an API key that could not be resolved | retryable |
 */
export function classifyResponse(result: PostResult): Classification {
  if (result.kind !== 'response') return 'retryable';
  if (result.statusCode >= 200 && result.statusCode <= 299) return 'delivered';
  if (result.statusCode >= 400 && result.statusCode <= 499) return 'rejected';
  return 'retryable';
}
