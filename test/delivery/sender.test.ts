import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpSender } from '../../src/delivery/http/sender.js';
import { classifyResponse } from '../../src/delivery/policy/classify.js';
import { refusal } from '../../src/delivery/http/address-guard.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';

/** A raw TCP server scripted per connection, for misbehaving receivers. */
async function tcpReceiver(onConnection: (socket: Socket) => void): Promise<{ url: string; server: TcpServer }> {
  const server = createTcpServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`, server };
}

let statusServer: Server;
let statusUrl = '';
const sender = new HttpSender({ timeoutMs: 1500, allowPrivateAddresses: true });

beforeAll(async () => {
  statusServer = createServer((request, response) => {
    const status = Number(new URL(request.url ?? '/', 'http://x').searchParams.get('status'));
    request.resume();
    request.on('end', () => {
      if (status === 301) response.writeHead(301, { location: 'http://127.0.0.1:1/elsewhere' }).end();
      else response.writeHead(status, { 'content-type': 'text/plain' }).end(`status ${status}`);
    });
  });
  await new Promise<void>((resolve) => statusServer.listen(0, '127.0.0.1', resolve));
  const address = statusServer.address();
  statusUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`;
});
afterAll(async () => {
  statusServer.closeAllConnections();
  await new Promise((resolve) => statusServer.close(resolve));
  await sender.close();
});

const post = (url: string, body = '{"count":0,"events":[],"webhookTimestamp":"2026-11-22T00:00:00.000Z"}') => sender.post({ url, body, headers: { 'X-API-Key': 'secret-value' } });

describe('a table of status codes against outcomes, against a real HTTP server', () => {
  it.each([
    [200, 'delivered'], [204, 'delivered'], [299, 'delivered'],
    [301, 'retryable'], [304, 'retryable'],
    [400, 'rejected'], [401, 'rejected'], [404, 'rejected'], [410, 'rejected'], [429, 'rejected'], [499, 'rejected'],
    [500, 'retryable'], [503, 'retryable'], [599, 'retryable'],
  ])('%i is %s', async (status, expected) => {
    const result = await post(`${statusUrl}?status=${status}`);
    expect(result).toMatchObject({ kind: 'response', statusCode: status });
    expect(classifyResponse(result)).toBe(expected);
  });

  it('100 (informational only, never a final status) ends as an error and is retried', async () => {
    const { url, server } = await tcpReceiver((socket) => {
      socket.once('data', () => socket.write('HTTP/1.1 100 Continue\r\n\r\n'));
    });
    const result = await post(url);
    // undici refuses an unsolicited 100 as a bad response rather than waiting for the deadline.
    expect(result.kind).toBe('error');
    expect(classifyResponse(result)).toBe('retryable');
    server.close();
  });

  it('does not follow a redirect', async () => {
    const result = await post(`${statusUrl}?status=301`);
    expect(result).toMatchObject({ kind: 'response', statusCode: 301 });
  });
});

describe('misbehaving receivers end as the spec says, with bounded memory', () => {
  it('a refused connection is retryable', async () => {
    const port = await freePort();
    const result = await post(`http://127.0.0.1:${port}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'connection_refused' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('a reset in the middle of the response is retryable', async () => {
    const { url, server } = await tcpReceiver((socket) => {
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial');
        setTimeout(() => socket.resetAndDestroy(), 50);
      });
    });
    const result = await post(url);
    // Headers arrived (200), then the body broke: the excerpt is what came.
    if (result.kind === 'response') expect(result.responseExcerpt.startsWith('partial')).toBe(true);
    else expect(result.errorClass).toBe('connection_reset');
    server.close();
  });

  it('a receiver that never answers times out', async () => {
    const { url, server } = await tcpReceiver(() => {});
    const result = await post(url);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'timeout' });
    expect(result.durationMs).toBeLessThan(5000);
    server.close();
  });

  it('a receiver that never reads a large request times out', async () => {
    const { url, server } = await tcpReceiver((socket) => socket.pause());
    const result = await post(url, `{"count":0,"events":[],"pad":"${'x'.repeat(8 * 1024 * 1024)}"}`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'timeout' });
    server.close();
  });

  it('a slow trickle of a response is cut at the deadline', async () => {
    const { url, server } = await tcpReceiver((socket) => {
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
        const timer = setInterval(() => (socket.writable ? socket.write('1\r\nx\r\n') : clearInterval(timer)), 100);
        socket.on('close', () => clearInterval(timer));
      });
    });
    const started = Date.now();
    const result = await post(url);
    // The excerpt cap or the deadline ends it; either way it is not held past the timeout.
    expect(Date.now() - started).toBeLessThan(4000);
    if (result.kind === 'response') expect(result.responseExcerpt.length).toBeLessThanOrEqual(1024);
    server.close();
  });

  it('a 10 MB response keeps only the first KiB', async () => {
    const big = createServer((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(64 * 1024, 'y');
      let sent = 0;
      const pump = (): void => {
        while (sent < 10 * 1024 * 1024) {
          sent += chunk.length;
          if (!response.write(chunk)) return void response.once('drain', pump);
        }
        response.end();
      };
      pump();
    });
    await new Promise<void>((resolve) => big.listen(0, '127.0.0.1', resolve));
    const address = big.address();
    const result = await post(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/`);
    expect(result).toMatchObject({ kind: 'response', statusCode: 200 });
    if (result.kind === 'response') expect(result.responseExcerpt.length).toBe(1024);
    big.closeAllConnections();
    big.close();
  });

  it('sends the body byte for byte with Content-Type application/json and the given headers', async () => {
    let seen: { body: string; headers: Record<string, string | string[] | undefined> } | undefined;
    const echo = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (c: Buffer) => chunks.push(c));
      request.on('end', () => {
        seen = { body: Buffer.concat(chunks).toString('utf8'), headers: request.headers };
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const address = echo.address();
    const body = '{"count":1,"events":[{"atomId":null,"eventId":"e","eventTimestamp":"t","assetId":1,"assetUuid":"u","eventType":"PURGED"}],"webhookTimestamp":"w"}';
    await sender.post({ url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/x`, body, headers: { 'X-API-Key': 'k', 'X-Tenant': 'acme' } });
    expect(seen!.body).toBe(body);
    expect(seen!.headers['content-type']).toBe('application/json');
    expect(seen!.headers['x-tenant']).toBe('acme');
    expect(seen!.headers['x-api-key']).toBe('k');
    echo.close();
  });

  it('never puts a header value (the API key) into an error message', async () => {
    const port = await freePort();
    const result = await post(`http://127.0.0.1:${port}/hook`);
    expect(JSON.stringify(result)).not.toContain('secret-value');
  });
});

describe('private and metadata addresses', () => {
  const strict = new HttpSender({ timeoutMs: 1000, allowPrivateAddresses: false });
  afterAll(() => strict.close());

  it.each([
    ['a hostname that resolves to 127.0.0.1', () => statusUrl.replace('127.0.0.1', 'localhost')],
    ['a loopback literal', () => statusUrl],
    ['an IPv4-mapped IPv6 literal', () => statusUrl.replace('127.0.0.1', '[::ffff:127.0.0.1]')],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data'],
    ['a private range', () => 'http://10.1.2.3/hook'],
  ])('refuses %s unless private addresses are allowed', async (_name, url) => {
    const result = await strict.post({ url: url(), body: '{}', headers: {} });
    expect(result).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('refuses the metadata address even when private addresses are allowed', async () => {
    expect(refusal('169.254.169.254', true)).toBe('cloud metadata address');
    expect(refusal('::ffff:169.254.169.254', true)).toBe('cloud metadata address');
    const result = await sender.post({ url: 'http://169.254.169.254/latest', body: '{}', headers: {} });
    expect(result).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
  });

  it('allows public addresses', () => {
    expect(refusal('93.184.216.34', false)).toBeNull();
    expect(refusal('2606:2800:220:1:248:1893:25c8:1946', false)).toBeNull();
  });
});
