import { Agent, EnvHttpProxyAgent, ProxyAgent, type Dispatcher } from 'undici';
import { guardedLookup } from './address-guard.js';

/**
 * How requests to receivers leave the process: directly, or through an HTTP
 * CONNECT proxy (network.proxy, or HTTPS_PROXY/HTTP_PROXY/NO_PROXY when it is
 * unset).
 *
 * With a proxy the proxy resolves the receiver's name and opens the
 * connection, so the address guard cannot check the address connected to.
 * It checks instead the addresses the name resolves to here, before the
 * CONNECT (see checkBeforeProxy): a receiver the guard would refuse is never
 * asked of the proxy. The connection to the proxy itself is not guarded: the
 * operator chose that address.
 */
export interface Egress {
  readonly dispatcher: Dispatcher;
  /** Whether some requests may go through a proxy (and so need checkBeforeProxy). */
  readonly proxied: boolean;
  /** The proxy's origin without credentials, for logs; null when direct. */
  readonly describe: string | null;
}

export interface EgressOptions {
  readonly timeoutMs: number;
  readonly allowPrivateAddresses: boolean;
  readonly keepAliveMs: number;
  /** network.proxy; when set every request goes through it. */
  readonly proxy?: string | undefined;
  /** Where HTTPS_PROXY, HTTP_PROXY and NO_PROXY (either case) are read when `proxy` is unset. */
  readonly env: NodeJS.ProcessEnv;
}

export function createEgress(options: EgressOptions): Egress {
  const common = {
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    keepAliveTimeout: options.keepAliveMs,
    // HTTP/1.1 only (undici offers h2 by ALPN unless told not to): the
    // timeouts, the response body limit and the handling of misbehaving
    // receivers are specified and tested over HTTP/1.1.
    allowH2: false,
    // No redirect interceptor is composed: undici then never follows a 3xx.
  };
  const direct = {
    ...common,
    connect: { timeout: options.timeoutMs, lookup: guardedLookup(options.allowPrivateAddresses) },
  };
  // Tunnel plain http receivers too, so the proxy never sees a request, only a CONNECT.
  const viaProxy = { ...common, connectTimeout: options.timeoutMs, proxyTunnel: true };
  if (options.proxy !== undefined) {
    return {
      dispatcher: new ProxyAgent({ ...viaProxy, uri: options.proxy }),
      proxied: true,
      describe: origin(options.proxy),
    };
  }
  const env = options.env;
  const httpProxy = nonEmpty(env.http_proxy ?? env.HTTP_PROXY);
  const httpsProxy = nonEmpty(env.https_proxy ?? env.HTTPS_PROXY);
  if (httpProxy === undefined && httpsProxy === undefined) {
    return { dispatcher: new Agent(direct), proxied: false, describe: null };
  }
  return {
    // Receivers NO_PROXY names are reached directly, through `direct`'s guarded lookup.
    dispatcher: new EnvHttpProxyAgent({
      ...direct,
      ...viaProxy,
      httpProxy,
      httpsProxy,
      noProxy: env.no_proxy ?? env.NO_PROXY ?? '',
    }),
    proxied: true,
    describe: [httpsProxy, httpProxy]
      .filter((value): value is string => value !== undefined)
      .map(origin)
      .join(', '),
  };
}

/**
 * Resolves a receiver's host name here and applies the address guard to every
 * address, before the proxy is asked to connect to it. Resolves with null when
 * the name may be connected to, or the error the guard or DNS gave.
 */
export function checkBeforeProxy(hostname: string, allowPrivateAddresses: boolean): Promise<Error | null> {
  return new Promise((resolve) => {
    guardedLookup(allowPrivateAddresses)(hostname, { all: true }, (error) => resolve(error));
  });
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

/** scheme://host:port of a proxy URL: never its user or password. */
function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(a proxy url that does not parse)';
  }
}
