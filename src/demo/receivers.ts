import { createServer, type Server } from 'node:http';

/** What a demo receiver has seen. */
export interface ReceiverStats {
  requests: number;
  accepted: number;
  events: number;
  lastEventId: string | null;
}

export interface DemoReceiver {
  readonly name: string;
  readonly url: string;
  readonly stats: ReceiverStats;
  close(): Promise<void>;
}

/**
 * A local receiver on 127.0.0.1. `answer` decides the status of each request
 * (by its number, from 1): the reliable receiver always answers 200; the flaky
 * one answers 503 now and then (retries) and sometimes 400 (a dead letter).
 */
export async function startReceiver(name: string, answer: (request: number) => number): Promise<DemoReceiver> {
  const stats: ReceiverStats = { requests: 0, accepted: 0, events: 0, lastEventId: null };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      stats.requests += 1;
      const status = answer(stats.requests);
      if (status >= 200 && status < 300) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          count: number;
          events: Array<{ eventId: string }>;
        };
        stats.accepted += 1;
        stats.events += body.count;
        stats.lastEventId = body.events.at(-1)?.eventId ?? stats.lastEventId;
      }
      response.writeHead(status, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    name,
    url: `http://127.0.0.1:${port}/${name}/assets`,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
