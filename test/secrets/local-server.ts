import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A real HTTP server on 127.0.0.1 that records every request and answers through `answer`. */
export interface LocalApi {
  readonly origin: string;
  readonly requests: RecordedRequest[];
  answer: (request: RecordedRequest, response: ServerResponse) => void;
  close(): Promise<void>;
}

export async function startLocalApi(): Promise<LocalApi> {
  const api: LocalApi = {
    origin: '',
    requests: [],
    answer: (_request, response) => void response.writeHead(404).end(),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const recorded: RecordedRequest = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8') };
      api.requests.push(recorded);
      api.answer(recorded, response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('expected a TCP port');
  return Object.assign(api, { origin: `http://127.0.0.1:${address.port}` });
}

export function json(response: ServerResponse, status: number, body: unknown, contentType = 'application/json'): void {
  response.writeHead(status, { 'content-type': contentType }).end(JSON.stringify(body));
}
