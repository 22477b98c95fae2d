import type { Socket } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { HttpSender, type PostResult } from '../../../src/delivery/http/sender.js';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { parseRetryAfter } from '../../../src/delivery/policy/retry-after.js';
import { PAYLOAD, tcpServer, type LocalServer } from '../../helpers/http-servers.js';

// What a receiver answers is data: every byte of it reaches the attempt
// record as storable text, a status HTTP does not define is classified, and
// a Retry-After that is not one valid value is absent.

const sender = new HttpSender({ timeoutMs: 2000, allowPrivateAddresses: true });
const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});
afterAll(() => sender.close());

/** A receiver that answers every request with these raw bytes and closes. */
async function answering(raw: Buffer | string): Promise<PostResult> {
  const server = await tcpServer((socket: Socket) => {
    socket.on('error', () => {});
    socket.once('data', () => socket.end(raw));
  });
  servers.push(server);
  return sender.post({ url: `${server.origin}/hook`, body: PAYLOAD, headers: {} });
}

const head = (status: string, headers: string[] = []): string =>
  `HTTP/1.1 ${status}\r\n${headers.map((header) => `${header}\r\n`).join('')}connection: close\r\n`;

function withBody(status: string, body: Buffer, headers: string[] = []): Buffer {
  return Buffer.concat([Buffer.from(`${head(status, headers)}content-length: ${body.length}\r\n\r\n`), body]);
}

describe('response bodies are stored whatever their bytes', () => {
  it.each([
    ['a 500 with a NUL byte', '500 Internal Server Error', Buffer.from('error\0page'), 'error\uFFFDpage', 'retryable'],
    ['a 200 with a NUL byte', '200 OK', Buffer.from('ok\0!'), 'ok\uFFFD!', 'delivered'],
    [
      'bytes that are not UTF-8',
      '503 Busy',
      Buffer.from([0x62, 0xff, 0xfe, 0x00, 0x63]),
      'b\uFFFD\uFFFD\uFFFDc',
      'retryable',
    ],
    [
      'a character cut by the excerpt limit',
      '200 OK',
      Buffer.concat([Buffer.alloc(1023, 'a'), Buffer.from('é')]),
      `${'a'.repeat(1023)}\uFFFD`,
      'delivered',
    ],
  ] as const)('%s', async (_name, status, body, excerpt, classification) => {
    const result = await answering(withBody(status, body));
    expect(result).toMatchObject({ kind: 'response', responseExcerpt: excerpt });
    expect(classifyResponse(result)).toBe(classification);
  });
});

describe('statuses HTTP does not define', () => {
  it.each(['000 Zero', '099 Low'])(
    '%s, which undici asserts against, is invalid_response, retried, without the assertion',
    async (status) => {
      const result = await answering(withBody(status, Buffer.from('x')));
      expect(result).toMatchObject({
        kind: 'error',
        errorClass: 'invalid_response',
        message: 'expected a status 100..599, got one below 100',
      });
      expect(classifyResponse(result)).toBe('retryable');
    },
  );

  it.each(['600 Odd', '700 Odd', '999 Odd'])('%s is invalid_response, retried, never passed on', async (status) => {
    const result = await answering(withBody(status, Buffer.from('x')));
    expect(result).toMatchObject({
      kind: 'error',
      errorClass: 'invalid_response',
      message: `expected a status 100..599, got ${status.slice(0, 3)}`,
    });
    expect(classifyResponse(result)).toBe('retryable');
  });
});

describe('Retry-After as the receiver sends it', () => {
  const now = new Date('2026-11-22T12:00:00.000Z');

  it('several headers arrive joined, and say nothing', async () => {
    const result = await answering(withBody('503 Busy', Buffer.from(''), ['retry-after: 120', 'retry-after: 60']));
    expect(result).toMatchObject({ kind: 'response', statusCode: 503, retryAfter: '120, 60' });
    expect(parseRetryAfter((result as { retryAfter?: string }).retryAfter, now)).toBeNull();
  });

  it('a value with bytes that are not ASCII says nothing', async () => {
    const raw = Buffer.concat([
      Buffer.from('HTTP/1.1 503 Busy\r\nretry-after: 12'),
      Buffer.from([0xe9, 0xff]),
      Buffer.from('\r\ncontent-length: 0\r\nconnection: close\r\n\r\n'),
    ]);
    const result = await answering(raw);
    expect(result).toMatchObject({ kind: 'response', statusCode: 503 });
    expect(parseRetryAfter((result as { retryAfter?: string }).retryAfter, now)).toBeNull();
  });
});
