import { performance } from 'node:perf_hooks';
import ipaddr from 'ipaddr.js';
import { Agent, request } from 'undici';
import { AddressRefusedError, guardedLookup, refusal } from './address-guard.js';

/** The result of one POST: a status from the receiver, or why there was none. Never thrown. */
export type PostResult =
  | { readonly kind: 'response'; readonly statusCode: number; readonly durationMs: number; readonly responseExcerpt: string }
  | { readonly kind: 'error'; readonly errorClass: ErrorClass; readonly message: string; readonly durationMs: number };

export type ErrorClass =
  | 'timeout' | 'connection_refused' | 'connection_reset' | 'dns' | 'tls' | 'address_refused' | 'invalid_url' | 'secret_unavailable' | 'other';

export interface SenderOptions {
  /** Connect, headers, body and overall deadline of one request (requestTimeoutSeconds). */
  readonly timeoutMs: number;
  /** network.allowPrivateAddresses. */
  readonly allowPrivateAddresses: boolean;
  /** Bytes of the response body kept for the attempt record; the rest is discarded. Default 1024. */
  readonly maxResponseBytes?: number;
}

export interface PostRequest {
  readonly url: string;
  readonly body: string;
  /** Configured headers, and X-API-Key when set. Content-Type is set here. */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * POSTs payloads through one shared undici Agent (keep-alive pools per
 * origin). Redirects are not followed (a 3xx is just a status). The response
 * body is read up to a small cap and the connection's stream destroyed after,
 * so a receiver answering gigabytes or trickling bytes can neither exhaust
 * memory nor hold a worker past the deadline.
 */
export class HttpSender {
  private readonly agent: Agent;
  private readonly maxResponseBytes: number;

  constructor(private readonly options: SenderOptions) {
    this.maxResponseBytes = options.maxResponseBytes ?? 1024;
    this.agent = new Agent({
      connect: { timeout: options.timeoutMs, lookup: guardedLookup(options.allowPrivateAddresses) },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 30_000,
    });
  }

  async post(target: PostRequest): Promise<PostResult> {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    const literal = literalRefusal(target.url, this.options.allowPrivateAddresses);
    if (literal) return { kind: 'error', ...literal, durationMs: elapsed() };
    try {
      const response = await request(target.url, {
        method: 'POST',
        body: target.body,
        headers: { ...target.headers, 'content-type': 'application/json' },
        dispatcher: this.agent,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      const excerpt = await readExcerpt(response.body, this.maxResponseBytes);
      return { kind: 'response', statusCode: response.statusCode, durationMs: elapsed(), responseExcerpt: excerpt };
    } catch (error) {
      return { kind: 'error', errorClass: classifyError(error), message: errorMessage(error), durationMs: elapsed() };
    }
  }

  /** Closes the pools once in-flight requests have finished. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** An IP literal in the URL is checked here: connecting to it involves no lookup. */
function literalRefusal(url: string, allowPrivate: boolean): { errorClass: ErrorClass; message: string } | null {
  let hostname: string;
  try {
    hostname = new URL(url).hostname;
  } catch {
    return { errorClass: 'invalid_url', message: 'expected an http or https URL' };
  }
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  if (!ipaddr.isValid(bare)) return null;
  const reason = refusal(bare, allowPrivate);
  return reason === null ? null : { errorClass: 'address_refused', message: new AddressRefusedError(bare, reason).message };
}

async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(): unknown }, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= max) break;
  }
  // Leaving the loop early destroys the stream; the rest is never read.
  body.destroy();
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}

function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let current = error;
  while (current && chain.length < 5) {
    chain.push(current);
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}

function classifyError(error: unknown): ErrorClass {
  for (const item of causes(error)) {
    if (item instanceof AddressRefusedError) return 'address_refused';
    const code = String((item as { code?: unknown }).code ?? '');
    const name = (item as { name?: unknown }).name;
    if (name === 'TimeoutError' || name === 'AbortError' || /TIMEOUT/.test(code) || code === 'ETIMEDOUT') return 'timeout';
    if (code === 'ECONNREFUSED') return 'connection_refused';
    if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return 'connection_reset';
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL') return 'dns';
    if (/^ERR_TLS|^ERR_SSL|CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return 'tls';
    if (code === 'ERR_INVALID_URL' || code === 'UND_ERR_INVALID_ARG') return 'invalid_url';
  }
  return 'other';
}

/** The error's own message (never request headers, which may hold the API key). */
function errorMessage(error: unknown): string {
  const chain = causes(error).filter((item): item is Error => item instanceof Error);
  const refused = chain.find((item) => item instanceof AddressRefusedError);
  if (refused) return refused.message;
  return chain.map((item) => item.message).filter(Boolean).join(': ').slice(0, 500);
}
