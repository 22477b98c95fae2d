import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';
import type { Logger } from 'pino';
import { describeError } from '../db/connect.js';
import { UserError } from '../errors.js';
import type { ServiceMetrics } from './metrics.js';
import { checkReadiness, type NotReady, type ReadinessSource } from './readiness.js';

/**
 * The limits of the probe port. It serves probes and scrapes, a handful of
 * short requests: every connection beyond them only takes file descriptors
 * that deliveries need, so idle and slow connections are closed early and
 * their number is capped.
 */
export const HTTP_SERVER_LIMITS = {
  /**
   * Connections open at once. At this many the port stops listening, so the
   * kernel refuses further ones before they take a file descriptor of this
   * process, and listens again as soon as one closes.
   */
  maxConnections: 64,
  /** A connection must have sent a request's complete headers within this time. */
  headersTimeoutMs: 5_000,
  /** A request must have been received completely within this time. */
  requestTimeoutMs: 10_000,
  /** An idle keep-alive connection is closed after this time. */
  keepAliveTimeoutMs: 5_000,
  /** A connection on which nothing moves (a client that stops reading, say) is destroyed after this time. */
  socketIdleTimeoutMs: 10_000,
  /** How often the header and request timeouts are checked. */
  checkIntervalMs: 1_000,
  /** Requests served on one connection before it is closed. */
  maxRequestsPerSocket: 1_000,
  /** How long one readiness answer and one rendering of /metrics are reused by the requests that follow. */
  answerReuseMs: 1_000,
} as const;

/**
 * GET /livez: 200 while the process runs. GET /readyz (and /healthz, its
 * older name): 200 when the service is ready (see checkReadiness), else 503
 * with a JSON reason. GET /metrics: Prometheus text format.
 *
 * No request reaches the database by itself: readiness is checked at most once
 * per answerReuseMs whatever the number of requests (concurrent ones share one
 * check), and /metrics is rendered from values ServiceMetrics reads at most
 * once per coalescing interval. `host` undefined listens on every interface
 * (IPv6 and IPv4 where the system has IPv6, else IPv4).
 */
export function startHttpServer(
  port: number,
  health: ReadinessSource,
  metrics: ServiceMetrics,
  host?: string,
  logger?: Logger,
): Promise<Server> {
  const limits = HTTP_SERVER_LIMITS;
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    probeAnswers(health, metrics),
  );
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // A backstop: a connection accepted above the cap is closed at once.
  server.maxConnections = limits.maxConnections;
  server.maxRequestsPerSocket = limits.maxRequestsPerSocket;
  // With no 'timeout' listener, Node destroys a socket idle this long.
  server.setTimeout(limits.socketIdleTimeoutMs);
  return listen(server, capConnections(server, port, host), host, logger);
}

/** The answers of the probe port, each readiness check and /metrics rendering shared for answerReuseMs. */
function probeAnswers(
  health: ReadinessSource,
  metrics: ServiceMetrics,
): (request: IncomingMessage, response: ServerResponse) => void {
  const readiness = reusedFor(HTTP_SERVER_LIMITS.answerReuseMs, () => checkReadiness(health));
  const metricsText = reusedFor(HTTP_SERVER_LIMITS.answerReuseMs, () => metrics.registry.metrics());
  return (request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET') {
      response.writeHead(405, { allow: 'GET' }).end();
    } else if (path === '/livez') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok' }));
    } else if (path === '/readyz' || path === '/healthz') {
      void readiness().then(
        (notReady: NotReady | null) => {
          response.writeHead(notReady === null ? 200 : 503, { 'content-type': 'application/json' });
          response.end(JSON.stringify(notReady === null ? { status: 'ok' } : { status: 'unavailable', ...notReady }));
        },
        (error: unknown) =>
          response
            .writeHead(503, { 'content-type': 'application/json' })
            .end(JSON.stringify({ status: 'unavailable', reason: errorMessage(error) })),
      );
    } else if (path === '/metrics') {
      metricsText().then(
        (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (error: unknown) =>
          response
            .writeHead(503, { 'content-type': 'text/plain' })
            .end(`metrics unavailable: ${errorMessage(error)}\n`),
      );
    } else {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /livez, /readyz or /metrics\n');
    }
  };
}

/** The cap on open connections: see capConnections. */
interface ConnectionCap {
  /** The port listened on once bound (the one asked for, or the one the system chose for 0). */
  boundPort: number;
  /** Listening stopped: at the cap, or after a failed listen. */
  paused: boolean;
  /** Listens again, once paused, when below the cap and not closing. */
  listenAgain(): void;
}

/**
 * Node's maxConnections closes a connection above the cap only after
 * accepting it: a burst of connections still takes as many descriptors at
 * once. Closing the listening socket instead (net.Server's close: the
 * connections open stay) makes the kernel refuse them.
 */
function capConnections(server: Server, port: number, host: string | undefined): ConnectionCap {
  let open = 0;
  const cap: ConnectionCap = {
    boundPort: port,
    paused: false,
    listenAgain() {
      if (!cap.paused || closing.has(server) || open >= HTTP_SERVER_LIMITS.maxConnections) return;
      cap.paused = false;
      server.listen({ port: cap.boundPort, host });
    },
  };
  server.on('connection', (socket) => {
    open += 1;
    socket.once('close', () => {
      open -= 1;
      cap.listenAgain();
    });
    if (open >= HTTP_SERVER_LIMITS.maxConnections && !cap.paused && server.listening) {
      cap.paused = true;
      NetServer.prototype.close.call(server);
    }
  });
  return cap;
}

/** The first listen: its failure is the caller's; any later one is tried again every second. */
function listen(server: Server, cap: ConnectionCap, host: string | undefined, logger?: Logger): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: cap.boundPort, host }, () => {
      server.removeListener('error', reject);
      const address = server.address();
      if (address !== null && typeof address === 'object') cap.boundPort = address.port;
      // Errors after the first listen (EMFILE on accept, the port taken while
      // it was paused) must not end the process; listening is tried again.
      server.on('error', (error: NodeJS.ErrnoException) => {
        if (error.syscall !== 'listen' || closing.has(server)) return;
        logger?.warn(
          { err: error.message, port: cap.boundPort },
          'the HTTP port could not listen again; trying every second',
        );
        cap.paused = true;
        setTimeout(() => cap.listenAgain(), 1_000).unref();
      });
      resolve(server);
    });
  });
}

const closing = new WeakSet<Server>();

/** Stops the server for good: it listens no more, and resolves once its connections have closed. */
export function closeHttpServer(server: Server): Promise<void> {
  closing.add(server);
  return new Promise((resolve) => {
    if (server.listening) server.close(() => resolve());
    else {
      // Paused (see startHttpServer): the listening socket is closed already;
      // 'close' comes when the last connection has.
      server.closeIdleConnections();
      server.getConnections((_error, count) => (count === 0 ? resolve() : server.once('close', () => resolve())));
    }
  });
}

/**
 * Wraps `work` so that calls while one is running share it, and its outcome
 * is reused for `ms` after it settles.
 */
function reusedFor<T>(ms: number, work: () => Promise<T>): () => Promise<T> {
  let current: { promise: Promise<T>; settledAt: number | null } | undefined;
  return () => {
    if (current && (current.settledAt === null || performance.now() - current.settledAt < ms)) return current.promise;
    const entry: { promise: Promise<T>; settledAt: number | null } = { promise: work(), settledAt: null };
    const settle = (): void => {
      entry.settledAt = performance.now();
    };
    entry.promise.then(settle, settle);
    current = entry;
    return entry.promise;
  };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The refusal of a `run` whose --http-host/--http-port cannot be listened on, naming the options and the cause. */
export function portUnavailable(port: number, host: string | undefined, error: unknown): UserError {
  return new UserError(
    'http_port_unavailable',
    host === undefined
      ? `--http-port ${port}: expected a port this process can listen on, got ${describeError(error)}`
      : `--http-host ${JSON.stringify(host)} --http-port ${port}: expected an address and port this process can listen on, got ${describeError(error)}`,
  );
}
