import { performance } from 'node:perf_hooks';
import ipaddr from 'ipaddr.js';
import { request, type Dispatcher } from 'undici';
import { refusal } from '../../net/addresses.js';
import { isLocalFault } from '../local-fault.js';
import { storableBytes, storableText } from '../storable-text.js';
import { AddressRefusedError } from './address-guard.js';
import { checkBeforeProxy, createEgress } from './egress.js';

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
      /** Storable text (see storableText), at most MAX_MESSAGE_LENGTH characters. */
      readonly message: string;
      readonly durationMs: number;
    };

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
 *   unsolicited `100 Continue`, see {@link HttpSender}), or its status is
 *   outside 100..599.
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

export interface SenderOptions {
  /**
   * The whole budget of one request in milliseconds (requestTimeoutSeconds):
   * the connect, headers and between-chunk body timeouts, and an overall
   * deadline from the start of the request to the end of reading the excerpt.
   */
  readonly timeoutMs: number;
  /** network.allowPrivateAddresses: loopback and private ranges are refused unless true. */
  readonly allowPrivateAddresses: boolean;
  /** Bytes of the response body kept as the excerpt; the rest is never read. Default 1024. */
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

/** How long an idle pooled connection to a receiver is kept open. */
const KEEP_ALIVE_MS = 30_000;

/** Header values shorter than this are not scrubbed from messages (they would mangle ordinary words). */
const MIN_REDACTED_LENGTH = 4;

const MAX_MESSAGE_LENGTH = 500;

/** The statuses HTTP defines (RFC 9110, section 15): anything else is not a response we read. */
const MIN_STATUS = 100;
const MAX_STATUS = 599;

/**
 * POSTs payloads to receivers through one shared undici Agent: a keep-alive
 * pool per origin, connections checked by the address guard.
 *
 * Rules (the receivers' contract, docs/spec-decisions.md):
 * - Content-Type is application/json, whatever the caller's headers say; the
 *   caller's headers (configured headers, X-API-Key) are sent as given.
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
    this.maxResponseBytes = Math.max(0, options.maxResponseBytes ?? 1024);
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
    const refused = this.checkUrl(target.url);
    if (refused) return { kind: 'error', ...refused, durationMs: elapsed() };
    if (this.proxied) {
      // The proxy resolves the name: the guard checks what it resolves to here, first.
      const hostname = new URL(target.url).hostname;
      const error = ipaddr.isValid(hostname.replace(/^\[|\]$/g, ''))
        ? null
        : await checkBeforeProxy(hostname, this.allowPrivateAddresses);
      if (error) {
        return {
          kind: 'error',
          errorClass: classifyError(error),
          message: storableMessage(errorMessage(error)),
          durationMs: elapsed(),
        };
      }
    }

    const headers = requestHeaders(target.headers);
    const secrets = secretForms(Object.values(target.headers));
    const deadline = new Deadline(this.timeoutMs);
    try {
      let statusCode: number;
      let body: ResponseBody;
      let retryAfter: string | undefined;
      try {
        const response = await request(target.url, {
          method: 'POST',
          body: target.body,
          headers,
          dispatcher: this.agent,
          signal: deadline.signal,
        });
        statusCode = response.statusCode;
        body = response.body;
        const header: unknown = response.headers['retry-after'];
        retryAfter = Array.isArray(header) ? header.join(', ') : typeof header === 'string' ? header : undefined;
      } catch (error) {
        return {
          kind: 'error',
          errorClass: classifyError(error),
          message: storableMessage(redact(errorMessage(error), secrets)),
          durationMs: elapsed(),
        };
      }
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

type ResponseBody = Dispatcher.ResponseData['body'];

/**
 * A request's overall deadline: aborts its signal with a TimeoutError, as
 * AbortSignal.timeout() would, but its timer is cleared as soon as the request
 * is done. AbortSignal.timeout()'s timer lives until it fires or its signal is
 * garbage-collected: at a few thousand requests a second with a 30-second
 * timeout that is some 100,000 timers and signals held at once, each costing
 * CPU to create and heap until collected; this one costs neither once cleared.
 */
class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;

  constructor(ms: number) {
    this.timer = setTimeout(
      () => this.controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
      ms,
    );
    // As AbortSignal.timeout()'s: the deadline alone never keeps the process running.
    this.timer.unref();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}

/** The caller's headers with Content-Type replaced by the sender's, whatever its case. */
function requestHeaders(given: Readonly<Record<string, string>>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(given)) {
    if (name.toLowerCase() !== 'content-type') headers[name] = value;
  }
  headers['content-type'] = 'application/json';
  return headers;
}

/**
 * Up to max bytes of the body as UTF-8 (a character cut at the limit becomes
 * U+FFFD), with every request header value the receiver echoes replaced (see
 * redactExcerpt). The stream is destroyed afterwards, so the rest is never
 * read and the connection is closed rather than drained. A body that breaks
 * or is cut by the deadline yields what arrived before.
 */
async function readExcerpt(body: ResponseBody, max: number, secrets: readonly Buffer[]): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Past the limit by the longest secret, so that one starting within the limit is read whole and replaced.
  const read = max > 0 ? max + Math.max(0, ...secrets.map((secret) => secret.length)) : 0;
  try {
    if (read > 0) {
      for await (const chunk of body) {
        chunks.push(chunk.subarray(0, read - size));
        size += Math.min(chunk.length, read - size);
        if (size >= read) break;
      }
    }
  } catch {
    // The status has arrived and decides; what came before the break is the excerpt.
  } finally {
    // We are done with the body whatever state it is in. Destroying a body not
    // yet read to its end emits an abort error: expected, so it is not an
    // uncaught one.
    body.on('error', () => {});
    body.destroy();
  }
  return storableBytes(redactExcerpt(Buffer.concat(chunks), max, secrets));
}

const REDACTED = Buffer.from('[redacted]');

/**
 * The first max bytes of data, with each occurrence of a secret that starts
 * within them replaced by [redacted] whole (data holds enough bytes past max
 * for it), so that no secret, nor its beginning, is kept.
 */
function redactExcerpt(data: Buffer, max: number, secrets: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [];
  let position = 0;
  while (position < Math.min(data.length, max)) {
    let at = -1;
    let length = 0;
    for (const secret of secrets) {
      const found = data.indexOf(secret, position);
      if (found !== -1 && (at === -1 || found < at || (found === at && secret.length > length))) {
        at = found;
        length = secret.length;
      }
    }
    if (at === -1 || at >= max) {
      parts.push(data.subarray(position, max));
      break;
    }
    parts.push(data.subarray(position, at), REDACTED);
    position = at + length;
  }
  return Buffer.concat(parts);
}

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

function property(item: unknown, key: 'code' | 'name' | 'message'): string {
  if (typeof item !== 'object' || item === null || !(key in item)) return '';
  const value: unknown = (item as Record<typeof key, unknown>)[key];
  return typeof value === 'string' ? value : '';
}

function classifyError(error: unknown): ErrorClass {
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

/** The messages of the error's chain, joined: what undici and the socket said. */
function errorMessage(error: unknown): string {
  const chain = causes(error);
  const refused = chain.find((item): item is AddressRefusedError => item instanceof AddressRefusedError);
  if (refused) return refused.message;
  const messages = chain
    .map((item) => (item instanceof Error ? item.message : typeof item === 'string' ? item : ''))
    .filter(Boolean);
  const unique = messages.filter((message, index) => messages.indexOf(message) === index);
  return unique.join(': ') || 'unknown error';
}

/**
 * The byte forms in which a request header value (the API key, an
 * Authorization header) can come back from a receiver or a library: as sent
 * (UTF-8 and ISO-8859-1), escaped in a JSON string, percent-encoded and
 * form-encoded. Longest first, so a longer form is replaced before a form it
 * contains. A value shorter than MIN_REDACTED_LENGTH is not a secret worth
 * mangling ordinary words for.
 */
function secretForms(values: readonly string[]): Buffer[] {
  const forms = new Map<string, Buffer>();
  const add = (form: Buffer): void => {
    if (form.length > 0) forms.set(form.toString('hex'), form);
  };
  for (const value of values) {
    if (value.length < MIN_REDACTED_LENGTH) continue;
    for (const text of [
      value,
      JSON.stringify(value).slice(1, -1),
      encodeURIComponent(value),
      new URLSearchParams({ v: value }).toString().slice(2),
    ]) {
      add(Buffer.from(text, 'utf8'));
    }
    add(Buffer.from(value, 'latin1'));
  }
  return [...forms.values()].sort((a, b) => b.length - a.length);
}

/**
 * Scrubs request header values from a message. No message built here includes
 * headers, but undici's and Node's messages are not ours to promise about: the
 * API key must never reach an attempt record. Before the message is cut to
 * its length, so that a secret is never cut in two and half kept.
 */
function redact(message: string, secrets: readonly Buffer[]): string {
  return redactExcerpt(Buffer.from(message, 'utf8'), Number.MAX_SAFE_INTEGER, secrets).toString('utf8');
}

/** A message as recorded: cut to MAX_MESSAGE_LENGTH, then made storable (a surrogate pair cut in two is replaced). */
export function storableMessage(message: string): string {
  return storableText(message.slice(0, MAX_MESSAGE_LENGTH));
}
