import { isLocalFault } from '../local-fault.js';
import { storableText } from '../../text/storable-text.js';
import { AddressRefusedError } from './address-guard.js';

/**
 * Why an attempt got no status. Stable names, recorded with the attempt and
 * used as a metrics label.
 *
 * - `timeout`: connect, headers or the overall deadline passed.
 * - `connection_refused`, `connection_reset`: TCP said no, or hung up before a status.
 * - `dns`: the host name did not resolve.
 * - `tls`: the TLS handshake or certificate check failed.
 * - `address_refused`: the address guard refused the address (private, metadata).
 * - `invalid_url`: not an http or https URL.
 * - `invalid_response`: the bytes were not an HTTP response (including an
 *   unsolicited `100 Continue`, see HttpSender), or its status is
 *   outside 100..599 (`000` included: see isStatusBelow100).
 * - `invalid_request`: undici refused the request itself (e.g. a header value
 *   with a line break).
 * - `secret_unavailable`: set by the caller when the API key could not be resolved.
 * - `proxy`: the proxy (network.proxy, HTTPS_PROXY) refused to open the
 *   tunnel to the receiver (a CONNECT answered other than 200).
 * - `local_fault`: this process ran out of a resource of its own for the
 *   request (file descriptors: EMFILE, ENFILE; memory: ENOMEM, ENOBUFS, an
 *   allocation failure). No fault of the receiver's: see isLocalFault
 *   (src/delivery/local-fault.ts).
 * - `other`: anything else; the message says what.
 */
export type ErrorClass =
  | 'timeout'
  | 'connection_refused'
  | 'connection_reset'
  | 'dns'
  | 'tls'
  | 'address_refused'
  | 'invalid_url'
  | 'invalid_response'
  | 'invalid_request'
  | 'secret_unavailable'
  | 'local_fault'
  | 'proxy'
  | 'other';

const MAX_MESSAGE_LENGTH = 500;

/** The error and its causes, outermost first. */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let current = error;
  while (current !== undefined && current !== null && chain.length < 8) {
    chain.push(current);
    current = typeof current === 'object' && 'cause' in current ? current.cause : undefined;
  }
  return chain;
}

/**
 * undici's parser asserts that a status is at least 100 (`assert(statusCode
 * >= 100)`), so a status line such as `HTTP/1.1 000 OK` throws an
 * AssertionError instead of a parse error: it is the receiver's answer that
 * is not HTTP, like a status above 599.
 */
function isStatusBelow100(item: unknown): boolean {
  return property(item, 'code') === 'ERR_ASSERTION' && /\bstatusCode\b/.test(property(item, 'message'));
}

/** The message of an answer whose status is below 100 (see isStatusBelow100), like the sender's for one above 599. */
const STATUS_BELOW_100 = 'expected a status 100..599, got one below 100';

function property(item: unknown, key: 'code' | 'name' | 'message'): string {
  if (typeof item !== 'object' || item === null || !(key in item)) return '';
  const value: unknown = (item as Record<typeof key, unknown>)[key];
  return typeof value === 'string' ? value : '';
}

/**
 * The ErrorClass of a request that failed before a status arrived, from what
 * undici, the socket, DNS, TLS or the address guard threw. A response, even
 * one the receiver refuses, is never classified here: that is the delivery
 * policy's classifyResponse.
 */
export function classifyTransportFailure(error: unknown): ErrorClass {
  if (isLocalFault(error)) return 'local_fault';
  for (const item of causes(error)) {
    if (item instanceof AddressRefusedError) return 'address_refused';
    if (/^Proxy response \(\d+\)/.test(property(item, 'message'))) return 'proxy';
    const code = property(item, 'code');
    const name = property(item, 'name');
    if (name === 'TimeoutError' || name === 'AbortError' || code === 'ETIMEDOUT' || code.endsWith('_TIMEOUT'))
      return 'timeout';
    if (code === 'ECONNREFUSED') return 'connection_refused';
    if (
      code === 'ENOTFOUND' ||
      code === 'EAI_AGAIN' ||
      code === 'EAI_FAIL' ||
      code === 'EAI_NODATA' ||
      code === 'EAI_NONAME'
    )
      return 'dns';
    if (/^(ERR_TLS|ERR_SSL|CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO_|HOSTNAME_MISMATCH|ERR_TLS_CERT)/.test(code))
      return 'tls';
    if (
      isStatusBelow100(item) ||
      name === 'HTTPParserError' ||
      code.startsWith('HPE_') ||
      code === 'UND_ERR_HEADERS_OVERFLOW' ||
      (code === 'UND_ERR_SOCKET' && /^bad (response|upgrade)$/.test(property(item, 'message')))
    )
      return 'invalid_response';
    if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED')
      return 'connection_reset';
    if (code === 'UND_ERR_INVALID_ARG' || code === 'ERR_INVALID_HTTP_TOKEN' || code === 'ERR_INVALID_CHAR')
      return 'invalid_request';
  }
  return 'other';
}

/**
 * The messages of a transport failure's chain, joined: what undici and the
 * socket said. Not yet redacted nor cut (see redactMessage, storableMessage).
 */
export function transportFailureMessage(error: unknown): string {
  const chain = causes(error);
  const refused = chain.find((item): item is AddressRefusedError => item instanceof AddressRefusedError);
  if (refused) return refused.message;
  if (chain.some(isStatusBelow100)) return STATUS_BELOW_100;
  const messages = chain
    .map((item) => (item instanceof Error ? item.message : typeof item === 'string' ? item : ''))
    .filter(Boolean);
  const unique = messages.filter((message, index) => messages.indexOf(message) === index);
  return unique.join(': ') || 'unknown error';
}

/** A message as recorded: cut to MAX_MESSAGE_LENGTH, then made storable (a surrogate pair cut in two is replaced). */
export function storableMessage(message: string): string {
  return storableText(message.slice(0, MAX_MESSAGE_LENGTH));
}
