import type { Socket } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { HttpSender } from '../../../src/delivery/http/sender.js';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { closedPort, httpServer, PAYLOAD, readBody, tcpServer, type LocalServer } from '../../helpers/http-servers.js';

// A short budget: every test below that waits, waits for this deadline.
const sender = new HttpSender({ timeoutMs: 500, allowPrivateAddresses: true });
const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});
afterAll(() => sender.close());

async function started(server: Promise<LocalServer>): Promise<LocalServer> {
  const running = await server;
  servers.push(running);
  return running;
}

/** Reads the request head, then runs `then` (the raw socket). */
function afterRequest(then: (socket: Socket) => void): (socket: Socket) => void {
  return (socket) => {
    socket.once('data', () => then(socket));
    socket.on('error', () => {});
  };
}

const post = (url: string, body = PAYLOAD) =>
  sender.post({ url, body, headers: { 'X-API-Key': 'key-that-must-not-leak' } });

describe('receivers that fail before a status: errors, all retried', () => {
  it('a refused connection is connection_refused', async () => {
    const result = await post(`http://127.0.0.1:${await closedPort()}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'connection_refused' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('a receiver that accepts and never answers is a timeout', async () => {
    const server = await started(tcpServer((socket) => socket.on('error', () => {})));
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'timeout' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('a receiver that never reads a request larger than the socket buffers is a timeout, not a hang', async () => {
    const server = await started(
      tcpServer((socket) => {
        socket.pause();
        socket.on('error', () => {});
      }),
    );
    const result = await post(
      `${server.origin}/hook`,
      `{"count":0,"events":[],"pad":"${'x'.repeat(16 * 1024 * 1024)}"}`,
    );
    expect(result).toMatchObject({ kind: 'error', errorClass: 'timeout' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('a reset before the status line is connection_reset', async () => {
    const server = await started(tcpServer(afterRequest((socket) => socket.resetAndDestroy())));
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'connection_reset' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('a close in the middle of the status line is connection_reset', async () => {
    const server = await started(tcpServer(afterRequest((socket) => socket.end('HTTP/1.1 20'))));
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'connection_reset' });
  });

  it('bytes that are not HTTP are invalid_response', async () => {
    const server = await started(tcpServer(afterRequest((socket) => socket.end('SMTP ready\r\n\r\n'))));
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'invalid_response' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('a TLS handshake with a plain HTTP server is a tls error', async () => {
    const server = await started(httpServer((request, response) => response.writeHead(200).end()));
    const result = await post(`https://127.0.0.1:${server.port}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'tls' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it('a name that does not resolve is a dns error', async () => {
    // .invalid is reserved (RFC 6761): it never resolves.
    const result = await post('http://receiver.invalid/hook');
    expect(result).toMatchObject({ kind: 'error', errorClass: 'dns' });
    expect(classifyResponse(result)).toBe('retryable');
  });

  it.each([
    ['not a URL', 'not a url'],
    ['another scheme', 'ftp://127.0.0.1/hook'],
  ])('%s is invalid_url, and nothing is sent', async (_name, url) => {
    const result = await post(url);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'invalid_url' });
    expect(classifyResponse(result)).toBe('retryable');
  });
});

describe('receivers that answer badly: the status decides, memory stays bounded', () => {
  it('a reset in the middle of the body keeps the status and what arrived before', async () => {
    const server = await started(
      tcpServer(
        afterRequest((socket) => {
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial');
          // Give the client time to read the head before the reset discards unread bytes.
          setTimeout(() => socket.resetAndDestroy(), 200);
        }),
      ),
    );
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'response', statusCode: 200, responseExcerpt: 'partial' });
    expect(classifyResponse(result)).toBe('delivered');
  });

  it('a 10 MB response keeps only the first 1024 bytes and closes the connection', async () => {
    const server = await started(
      httpServer((request, response) => {
        void readBody(request).then(() => {
          response.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(10 * 1024 * 1024) });
          const chunk = Buffer.alloc(64 * 1024, 'y');
          let sent = 0;
          const pump = (): void => {
            while (sent < 10 * 1024 * 1024 && !response.destroyed) {
              sent += chunk.length;
              if (!response.write(chunk)) return void response.once('drain', pump);
            }
            response.end();
          };
          pump();
        });
      }),
    );
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'response', statusCode: 200 });
    expect(result.kind === 'response' && result.responseExcerpt).toBe('y'.repeat(1024));
    // The sender hung up instead of draining the rest into a pooled connection.
    await server.allClosed();
  });

  it('an endless response (gigabytes) is cut after the excerpt, not read to the deadline', async () => {
    let written = 0;
    const server = await started(
      httpServer((request, response) => {
        void readBody(request).then(() => {
          response.writeHead(200, { 'content-type': 'text/plain' });
          const chunk = Buffer.alloc(64 * 1024, 'z');
          const pump = (): void => {
            while (!response.destroyed) {
              written += chunk.length;
              if (!response.write(chunk)) return void response.once('drain', pump);
            }
          };
          response.on('close', () => response.removeAllListeners('drain'));
          pump();
        });
      }),
    );
    const result = await post(`${server.origin}/hook`);
    // Not a timeout: the excerpt was complete long before the deadline.
    expect(result).toMatchObject({ kind: 'response', statusCode: 200 });
    expect(result.kind === 'response' && result.responseExcerpt).toBe('z'.repeat(1024));
    await server.allClosed();
    // Bounded by socket buffers, nowhere near what an unbounded reader would have pulled in.
    expect(written).toBeLessThan(256 * 1024 * 1024);
  });

  it('a response trickled a byte at a time is cut by the overall deadline, though no single gap exceeds the timeout', async () => {
    const server = await started(
      tcpServer(
        afterRequest((socket) => {
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n');
          const timer = setInterval(() => socket.write('1\r\nx\r\n'), 20);
          socket.on('close', () => clearInterval(timer));
        }),
      ),
    );
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'response', statusCode: 200 });
    // At one byte per 20 ms the 1024-byte excerpt would take 20 s: the 500 ms deadline cut it.
    expect(result.kind === 'response' && result.responseExcerpt).toMatch(/^x{1,1023}$/);
    await server.allClosed();
  });

  it('a trickle that has not sent the status line by the deadline is a timeout', async () => {
    const server = await started(
      tcpServer(
        afterRequest((socket) => {
          const head = 'HTTP/1.1 200 OK\r\nX-Slow: ' + 'a'.repeat(10_000);
          let index = 0;
          const timer = setInterval(() => socket.write(head[index++ % head.length] ?? 'a'), 20);
          socket.on('close', () => clearInterval(timer));
        }),
      ),
    );
    const result = await post(`${server.origin}/hook`);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'timeout' });
  });
});

describe('a smaller excerpt', () => {
  it('maxResponseBytes bounds the excerpt, and 0 keeps none', async () => {
    const server = await started(
      httpServer((request, response) => {
        void readBody(request).then(() => response.writeHead(500).end('0123456789'));
      }),
    );
    const four = new HttpSender({ timeoutMs: 500, allowPrivateAddresses: true, maxResponseBytes: 4 });
    const none = new HttpSender({ timeoutMs: 500, allowPrivateAddresses: true, maxResponseBytes: 0 });
    try {
      expect(await four.post({ url: server.origin, body: PAYLOAD, headers: {} })).toMatchObject({
        kind: 'response',
        statusCode: 500,
        responseExcerpt: '0123',
      });
      expect(await none.post({ url: server.origin, body: PAYLOAD, headers: {} })).toMatchObject({
        kind: 'response',
        statusCode: 500,
        responseExcerpt: '',
      });
    } finally {
      await Promise.all([four.close(), none.close()]);
    }
  });
});
