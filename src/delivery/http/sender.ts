import { performance } from 'node:perf_hooks';
import ipaddr from 'ipaddr.js';
import { request, type Dispatcher } from 'undici';
import { refusal } from '../../net/addresses.js';
import { packageVersion } from '../../version.js';
import { AddressRefusedError } from './address-guard.js';
import { Deadline } from './deadline.js';
import { checkBeforeProxy, createEgress } from './egress.js';
import { readExcerpt, type ResponseBody } from './excerpt.js';
import { redactMessage, secretForms } from './redact.js';
import {
  classifyTransportFailure,
  storableMessage,
  transportFailureMessage,
  type ErrorClass,
} from './transport-errors.js';

export { storableMessage, type ErrorClass } from './transport-errors.js';

/**
 * The result of one POST: the receiver's status, or why there was none.
 * Never thrown: a transport failure is a result like any other.
 */
export type PostResult =
  | {
      readonly kind: 'response';
      readonly statusCode: number;
      readonly durationMs: number;
      /** Storable text (see storableText): NUL and bytes that are not UTF-8 are replaced. */
      readonly responseExcerpt: string;
      /**
       * The response's Retry-After header as sent, if any (see
       * policy/retry-after.ts); several headers are joined with ", " as
       * HTTP joins repeated fields.
       */
      readonly retryAfter?: string;
    }
  | {
      readonly kind: 'error';
      readonly errorClass: ErrorClass;
      /** Storable text, cut to its length (see storableMessage). */
      readonly message: string;
      readonly durationMs: number;
    };

export interface SenderOptions {
  /**
   * The whole budget of one request in milliseconds (requestTimeoutSeconds):
   * the connect, headers and between-chunk body timeouts, and an overall
   * deadline from the start of the request to the end of reading the excerpt.
   */
  readonly timeoutMs: number;
  /** network.allowPrivateAddresses: loopback and private ranges are refused unless true. */
  readonly allowPrivateAddresses: boolean;
  /** Bytes of the response body kept as the excerpt; the rest is never read. Default DEFAULT_EXCERPT_BYTES. */
  readonly maxResponseBytes?: number;
  /** network.proxy: every request goes through this HTTP CONNECT proxy. */
  readonly proxy?: string | undefined;
  /**
   * Where HTTPS_PROXY, HTTP_PROXY and NO_PROXY are read when `proxy` is unset
   * (the service passes process.env). Default: none, so requests go directly.
   */
  readonly env?: NodeJS.ProcessEnv;
}

export interface PostRequest {
  readonly url: string;
  /** The exact bytes to send (UTF-8). */
  readonly body: string;
  /** The webhook's configured headers and X-API-Key when set. Content-Type is the sender's. */
  readonly headers: Readonly<Record<string, string>>;
}

/** Bytes of a response body kept when SenderOptions.maxResponseBytes is unset: enough to show a receiver's error. */
const DEFAULT_EXCERPT_BYTES = 1024;

/** How long an idle pooled connection to a receiver is kept open. */
const KEEP_ALIVE_MS = 30_000;

/** The statuses HTTP defines (RFC 9110, section 15): anything else is not a response we read. */
const MIN_STATUS = 100;
const MAX_STATUS = 599;

/**
 * POSTs payloads to receivers through one shared undici Agent: a keep-alive
 * pool per origin, connections checked by the address guard.
 *
 * Rules (the receivers' contract, docs/spec-decisions.md):
 * - Content-Type is application/json, whatever the caller's headers say; the
 *   caller's headers (configured headers, X-API-Key) are sent as given, with
 *   User-Agent asset-webhooks/<version> unless they set one.
 * - Redirects are not followed: a 3xx is just a status.
 * - An overall deadline (an AbortSignal aborted after timeoutMs) covers DNS, connect,
 *   sending, headers and reading the excerpt, so neither a receiver that never
 *   reads the request nor one that trickles its response a byte at a time can
 *   hold an attempt past the timeout.
 * - The response body is read up to maxResponseBytes and the stream destroyed
 *   after, so a receiver answering gigabytes costs one chunk of memory.
 * - Once the status line has arrived, the status decides the outcome: a body
 *   that then breaks, or is cut by the deadline, only shortens the excerpt.
 * - Whatever the receiver sends is data, never a fault: a status outside
 *   100..599 is an `invalid_response`; the excerpt and every message are
 *   storable text (storableText), so no answer can make the statement that
 *   records it fail; the Retry-After header is passed on as sent, for
 *   parseRetryAfter to read or ignore.
 * - 1xx: undici never sends `Expect: 100-continue`, so a `100 Continue` is
 *   unsolicited; undici drops the connection (`invalid_response`, retried).
 *   Other informational responses (102, 103) are skipped and the final status
 *   decides; one never followed by a final status ends as a `timeout`.
 * - Transport failures are returned as `kind: 'error'`, never thrown. Their
 *   messages and the response excerpt never contain a request header value
 *   (one may be the API key) in any form secretForms lists.
 */
export class HttpSender {
  private readonly agent: Dispatcher;
  private readonly proxied: boolean;
  private readonly egress: string | null;
  private readonly timeoutMs: number;
  private readonly allowPrivateAddresses: boolean;
  private readonly maxResponseBytes: number;

  constructor(options: SenderOptions) {
    this.timeoutMs = options.timeoutMs;
    this.allowPrivateAddresses = options.allowPrivateAddresses;
    this.maxResponseBytes = Math.max(0, options.maxResponseBytes ?? DEFAULT_EXCERPT_BYTES);
    const egress = createEgress({
      timeoutMs: options.timeoutMs,
      allowPrivateAddresses: options.allowPrivateAddresses,
      keepAliveMs: KEEP_ALIVE_MS,
      proxy: options.proxy,
      env: options.env ?? {},
    });
    this.agent = egress.dispatcher;
    this.proxied = egress.proxied;
    this.egress = egress.describe;
  }

  /** The proxy requests go through (its origin, never credentials), or null when they go directly. */
  get proxy(): string | null {
    return this.egress;
  }

  async post(target: PostRequest): Promise<PostResult> {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    // Checked without an await when no proxy is in the way: the request is under way before post returns.
    const refused = this.checkUrl(target.url) ?? (this.proxied ? await this.proxyRefusal(target.url) : null);
    if (refused) return { kind: 'error', ...refused, durationMs: elapsed() };
    const secrets = secretForms(Object.values(target.headers));
    const deadline = new Deadline(this.timeoutMs);
    try {
      const answer = await this.exchange(target, secrets, deadline.signal);
      if ('errorClass' in answer) return { kind: 'error', ...answer, durationMs: elapsed() };
      const { statusCode, body, retryAfter } = answer;
      if (!Number.isInteger(statusCode) || statusCode < MIN_STATUS || statusCode > MAX_STATUS) {
        body.on('error', () => {});
        body.destroy();
        return {
          kind: 'error',
          errorClass: 'invalid_response',
          message: `expected a status ${MIN_STATUS}..${MAX_STATUS}, got ${String(statusCode).slice(0, 16)}`,
          durationMs: elapsed(),
        };
      }
      const responseExcerpt = await readExcerpt(body, this.maxResponseBytes, secrets);
      return {
        kind: 'response',
        statusCode,
        durationMs: elapsed(),
        responseExcerpt,
        ...(retryAfter === undefined ? {} : { retryAfter }),
      };
    } finally {
      deadline.clear();
    }
  }

  /** Through a proxy, which resolves the name: why what it resolves to here may not be posted to, or null. */
  private async proxyRefusal(url: string): Promise<{ errorClass: ErrorClass; message: string } | null> {
    const hostname = new URL(url).hostname;
    if (ipaddr.isValid(hostname.replace(/^\[|\]$/g, ''))) return null;
    const error = await checkBeforeProxy(hostname, this.allowPrivateAddresses);
    return error
      ? { errorClass: classifyTransportFailure(error), message: storableMessage(transportFailureMessage(error)) }
      : null;
  }

  /** Sends the request: the response's status, body and Retry-After, or how the transport failed. */
  private async exchange(
    target: PostRequest,
    secrets: ReturnType<typeof secretForms>,
    signal: AbortSignal,
  ): Promise<
    | { statusCode: number; body: ResponseBody; retryAfter: string | undefined }
    | { errorClass: ErrorClass; message: string }
  > {
    try {
      const response = await request(target.url, {
        method: 'POST',
        body: target.body,
        headers: requestHeaders(target.headers),
        dispatcher: this.agent,
        signal,
      });
      const header: unknown = response.headers['retry-after'];
      return {
        statusCode: response.statusCode,
        body: response.body,
        retryAfter: Array.isArray(header) ? header.join(', ') : typeof header === 'string' ? header : undefined,
      };
    } catch (error) {
      return {
        errorClass: classifyTransportFailure(error),
        message: storableMessage(redactMessage(transportFailureMessage(error), secrets)),
      };
    }
  }

  /** Closes the pools once in-flight requests have finished. */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /**
   * An http(s) URL, and when its host is an IP literal, one the guard allows.
   * A literal is checked here because connecting to it involves no lookup.
   */
  private checkUrl(url: string): { errorClass: ErrorClass; message: string } | null {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return {
        errorClass: 'invalid_url',
        message: 'expected an absolute http or https URL, got one that does not parse',
      };
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      return {
        errorClass: 'invalid_url',
        message: `expected an http or https URL, got scheme ${parsed.protocol.slice(0, -1)}`,
      };
    }
    // WHATWG URL has already normalised the host: 0x7f.1 is 127.0.0.1, [::ffff:127.0.0.1] is [::ffff:7f00:1].
    const host = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
    if (!ipaddr.isValid(host)) return null;
    const reason = refusal(host, this.allowPrivateAddresses);
    return reason === null
      ? null
      : { errorClass: 'address_refused', message: new AddressRefusedError(host, reason).message };
  }
}

/**
 * The caller's headers with Content-Type replaced by the sender's, whatever
 * its case, and `User-Agent: asset-webhooks/<version>` unless the caller's
 * headers (the webhook's configured ones) set a User-Agent in any case: the
 * rule sets of web application firewalls refuse a request without one.
 */
function requestHeaders(given: Readonly<Record<string, string>>): Record<string, string> {
  const headers: Record<string, string> = {};
  let userAgent = false;
  for (const [name, value] of Object.entries(given)) {
    const lower = name.toLowerCase();
    if (lower === 'user-agent') userAgent = true;
    if (lower !== 'content-type') headers[name] = value;
  }
  headers['content-type'] = 'application/json';
  if (!userAgent) headers['user-agent'] = `asset-webhooks/${packageVersion()}`;
  return headers;
}
