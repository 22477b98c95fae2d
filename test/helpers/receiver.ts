import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { checkReceivedBody } from './payload-schema.js';

export interface ReceivedRequest {
  readonly at: number;
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A status with response headers (e.g. Retry-After). */
export interface ReceiverAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * A real HTTP receiver on 127.0.0.1 that records every request and answers
 * with the status `respond` gives (or never answers when it returns 'hang').
 */
export interface TestReceiver {
  readonly url: string;
  readonly requests: ReceivedRequest[];
  respond: (request: ReceivedRequest, index: number) => number | ReceiverAnswer | 'hang' | Promise<number>;
  close(): Promise<void>;
  /** Resolves once `count` requests have arrived. */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
}

export async function startTestReceiver(path = '/hook'): Promise<TestReceiver> {
  const requests: ReceivedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const receiver: TestReceiver = {
    url: '',
    requests,
    respond: () => 200,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    waitFor: (count, timeoutMs = 20_000) =>
      requests.length >= count
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            const timer = setTimeout(
              () => reject(new Error(`expected ${count} requests, got ${requests.length} within ${timeoutMs}ms`)),
              timeoutMs,
            );
            waiters.push({
              count,
              resolve: () => {
                clearTimeout(timer);
                resolve();
              },
            });
          }),
  };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const received: ReceivedRequest = {
        at: Date.now(),
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      if (received.method === 'POST') checkReceivedBody(received.body);
      requests.push(received);
      for (const waiter of waiters.filter((w) => requests.length >= w.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
      const status = receiver.respond(received, requests.length - 1);
      if (status === 'hang') return;
      void Promise.resolve(status).then((answer) => {
        const { status: code, headers } = typeof answer === 'number' ? { status: answer, headers: {} } : answer;
        if (!response.destroyed) response.writeHead(code, { 'content-type': 'text/plain', ...headers }).end('ok');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  (receiver as { url: string }).url =
    `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}${path}`;
  return receiver;
}

export function answerAfter(receiver: TestReceiver, delayMs: number): { most(): number } {
  let open = 0;
  let most = 0;
  receiver.respond = () => {
    open += 1;
    most = Math.max(most, open);
    return new Promise<number>((resolve) =>
      setTimeout(() => {
        open -= 1;
        resolve(200);
      }, delayMs),
    );
  };
  return { most: () => most };
}

/** How long eventually() polls, and what its timeout error names. */
export interface EventuallyOptions {
  /** Default 20 000. */
  readonly timeoutMs?: number;
  /** Named in the timeout error; default 'condition'. */
  readonly what?: string;
}

/** Polls until check() returns a value that is not undefined; a check that throws ends the wait with its error. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  { timeoutMs = 20_000, what = 'condition' }: EventuallyOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
