import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';

/**
 * Local servers for tests: every one listens on 127.0.0.1 on a free port,
 * tracks the connections it accepted and destroys them on close(), so a test
 * never waits for a keep-alive connection to time out. The receiver of
 * webhook deliveries is test/helpers/receiver.ts.
 */

/** A server on 127.0.0.1 that counts the connections it accepted and closes everything on close(). */
export interface LocalServer {
  readonly port: number;
  /** http://127.0.0.1:PORT */
  readonly origin: string;
  /** Connections accepted so far. */
  connections(): number;
  /** Resolves when every accepted connection has closed. */
  allClosed(): Promise<void>;
  close(): Promise<void>;
}

function track(server: Server | TcpServer): Pick<LocalServer, 'connections' | 'allClosed'> & { sockets: Set<Socket> } {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let waiters: Array<() => void> = [];
  server.on('connection', (socket: Socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) {
        for (const resolve of waiters) resolve();
        waiters = [];
      }
    });
  });
  return {
    sockets,
    connections: () => accepted,
    allClosed: () => (sockets.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve))),
  };
}

async function listen(server: Server | TcpServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('expected the server to listen on a TCP port');
  return address.port;
}

async function wrap(server: Server | TcpServer): Promise<LocalServer> {
  const tracked = track(server);
  const port = await listen(server);
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    connections: tracked.connections,
    allClosed: tracked.allClosed,
    close: async () => {
      for (const socket of tracked.sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A real node:http server. */
export function httpServer(handler: RequestListener): Promise<LocalServer> {
  return wrap(createServer(handler));
}

/** A raw TCP server scripted per connection: for receivers that break HTTP. */
export function tcpServer(onConnection: (socket: Socket) => void): Promise<LocalServer> {
  return wrap(createTcpServer(onConnection));
}

/** A port on 127.0.0.1 nobody listens on (listened on, then closed). */
export async function closedPort(): Promise<number> {
  const server = createTcpServer();
  const port = await listen(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The whole request body as bytes. */
export async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks);
}

/** A valid, empty webhook payload body, for tests that post one. */
export const PAYLOAD = '{"count":0,"events":[],"webhookTimestamp":"2026-11-22T00:00:00.000Z"}';

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A local HTTP API (a stand-in for a secret manager) that records every request and answers through `answer`. */
export interface LocalApi extends LocalServer {
  readonly requests: RecordedRequest[];
  /** Answers each request; by default 404. Replace it to script the API. */
  answer: (request: RecordedRequest, response: ServerResponse) => void;
}

export async function startLocalApi(): Promise<LocalApi> {
  const requests: RecordedRequest[] = [];
  let api: LocalApi | undefined;
  const server = await httpServer((request, response) => {
    void readBody(request).then((body) => {
      const recorded: RecordedRequest = {
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body: body.toString('utf8'),
      };
      requests.push(recorded);
      api!.answer(recorded, response);
    });
  });
  api = Object.assign(server, {
    requests,
    answer: (_request: RecordedRequest, response: ServerResponse) => void response.writeHead(404).end(),
  });
  return api;
}

/** Answers with `body` as JSON (or under another content type). */
export function json(response: ServerResponse, status: number, body: unknown, contentType = 'application/json'): void {
  response.writeHead(status, { 'content-type': contentType }).end(JSON.stringify(body));
}
