import type { PostResult } from '../http/sender.js';

export type Classification = 'delivered' | 'rejected' | 'retryable';

/**
 * The single place that maps an attempt's result to retry yes or no (spec
 * section 7, CONTRACT section 5): 2xx delivered; 4xx rejected, never retried;
 * anything else retried: 1xx and 3xx (redirects are not followed), 5xx, codes
 * beyond 599, and every transport failure (timeout, refused or reset
 * connection, TLS or DNS error, refused address, unresolvable API key).
 */
export function classifyResponse(result: PostResult): Classification {
  if (result.kind !== 'response') return 'retryable';
  if (result.statusCode >= 200 && result.statusCode <= 299) return 'delivered';
  if (result.statusCode >= 400 && result.statusCode <= 499) return 'rejected';
  return 'retryable';
}
