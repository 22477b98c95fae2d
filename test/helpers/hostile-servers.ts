import type { Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { tcpServer, type LocalServer } from './http-servers.js';

/**
 * Receivers that answer webhook deliveries with whatever bytes a test
 * scripts: raw TCP servers on 127.0.0.1, so the HTTP framing itself can be
 * broken (statuses node:http refuses to write, header bytes that are not
 * ASCII, TLS records, resets). Each one reads a request whole before it
 * answers, so an answer never races the request it answers and no unread
 * request byte turns a close into a reset the script did not ask for.
 */

/** One request as a hostile receiver read it. */
export interface RawRequest {
  /** The request line and headers, as ISO-8859-1 text. */
  readonly head: string;
  readonly body: Buffer;
}

/** What a hostile receiver does once a request has arrived whole: write to the socket, or not. */
export type Answer = (socket: Socket, request: RawRequest, bytes: ByteCounter) => void;

/** Counts the bytes a receiver wrote, so a test can bound what a client pulled in. */
export interface ByteCounter {
  add(count: number): void;
}

export interface HostileServer extends LocalServer {
  /** http://127.0.0.1:PORT/hook */
  readonly url: string;
  /** Requests read whole so far, in arrival order. */
  readonly requests: RawRequest[];
  /** Bytes the answers wrote so far (as counted by the answer through its ByteCounter). */
  bytesWritten(): number;
}

/** The most bytes of a request head a hostile receiver reads before it gives up on the connection. */
const MAX_REQUEST_HEAD = 64 * 1024;
/** The most bytes of a request body a hostile receiver reads: more than a test's payloads. */
const MAX_REQUEST_BODY = 32 * 1024 * 1024;

/** A raw HTTP/1.1 receiver that reads each connection's first request whole, then calls `answer`. */
export async function hostileServer(answer: Answer): Promise<HostileServer> {
  const requests: RawRequest[] = [];
  let written = 0;
  const counter: ByteCounter = { add: (count) => void (written += count) };
  const server = await tcpServer((socket) => {
    socket.on('error', () => {});
    let buffered = Buffer.alloc(0);
    let answered = false;
    const onData = (chunk: Buffer): void => {
      if (answered) return;
      buffered = Buffer.concat([buffered, chunk]);
      const request = completeRequest(buffered);
      if (request === 'incomplete') return;
      answered = true;
      socket.off('data', onData);
      if (request === 'malformed') return void socket.destroy();
      requests.push(request);
      answer(socket, request, counter);
    };
    socket.on('data', onData);
  });
  return Object.assign(server, {
    url: `${server.origin}/hook`,
    requests,
    bytesWritten: () => written,
  });
}

/** The request in `data` once its head and body have arrived (Content-Length or chunked). */
function completeRequest(data: Buffer): RawRequest | 'incomplete' | 'malformed' {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return data.length > MAX_REQUEST_HEAD ? 'malformed' : 'incomplete';
  const head = data.subarray(0, end).toString('latin1');
  const rest = data.subarray(end + 4);
  const length = /^content-length:\s*(\d+)\s*$/im.exec(head);
  if (length) {
    const size = Number(length[1]);
    if (size > MAX_REQUEST_BODY) return 'malformed';
    return rest.length < size ? 'incomplete' : { head, body: rest.subarray(0, size) };
  }
  if (/^transfer-encoding:\s*chunked\s*$/im.test(head)) {
    const body = dechunk(rest);
    return body === null ? 'incomplete' : { head, body };
  }
  return { head, body: Buffer.alloc(0) };
}

/** A chunked body decoded, or null while its last chunk has not arrived. */
function dechunk(data: Buffer): Buffer | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd === -1) return null;
    const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) return null;
    if (size === 0) return data.indexOf('\r\n', lineEnd + 2) === -1 ? null : Buffer.concat(parts);
    if (data.length < lineEnd + 2 + size + 2) return null;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** The eventIds of a request that carried a webhook payload (none when its body is not one). */
export function requestEventIds(request: RawRequest): string[] {
  try {
    const parsed = JSON.parse(request.body.toString('utf8')) as { events?: Array<{ eventId?: unknown }> };
    return (parsed.events ?? []).map((event) => String(event.eventId));
  } catch {
    return [];
  }
}

/** A status line and header lines, as raw bytes (values may be any bytes). */
export function responseHead(statusLine: string, headers: ReadonlyArray<readonly [string, string | Buffer]>): Buffer {
  const lines: Buffer[] = [Buffer.from(`${statusLine}\r\n`, 'latin1')];
  for (const [name, value] of headers) {
    lines.push(Buffer.from(`${name}: `, 'latin1'), Buffer.isBuffer(value) ? value : Buffer.from(value, 'latin1'));
    lines.push(Buffer.from('\r\n'));
  }
  lines.push(Buffer.from('\r\n'));
  return Buffer.concat(lines);
}

/** Answers with a complete response (Content-Length set from the body) and closes the connection. */
export function complete(
  statusLine: string,
  headers: ReadonlyArray<readonly [string, string | Buffer]>,
  body: string | Buffer = '',
): Answer {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1');
  const message = Buffer.concat([
    responseHead(statusLine, [...headers, ['Content-Length', String(bytes.length)], ['Connection', 'close']]),
    bytes,
  ]);
  return (socket, _request, counter) => {
    counter.add(message.length);
    socket.end(message);
  };
}

/**
 * Writes `chunk` again and again, as fast as the client reads, until the
 * client hangs up or `limit` bytes are written (then the connection is
 * destroyed): a body that is lazily made, never held in memory.
 */
export function stream(socket: Socket, chunk: Buffer, limit: number, counter: ByteCounter): void {
  let sent = 0;
  const pump = (): void => {
    while (!socket.destroyed) {
      if (sent >= limit) return void socket.destroy();
      sent += chunk.length;
      counter.add(chunk.length);
      if (!socket.write(chunk)) return void socket.once('drain', pump);
    }
  };
  socket.on('close', () => socket.removeAllListeners('drain'));
  pump();
}

/**
 * Writes informational (1xx) responses, one every `everyMs`, and never a
 * final status, until the client hangs up.
 */
export function informationalForever(everyMs: number): Answer {
  return (socket, _request, counter) => {
    const line = Buffer.from('HTTP/1.1 102 Processing\r\n\r\n', 'latin1');
    const timer = setInterval(() => {
      if (socket.destroyed) return;
      counter.add(line.length);
      socket.write(line);
    }, everyMs);
    socket.on('close', () => clearInterval(timer));
    counter.add(line.length);
    socket.write(line);
  };
}

/**
 * A gzip member of `megabytes` MiB of zeros, concatenated `members` times:
 * a valid multi-member gzip stream (RFC 1952) that inflates to
 * megabytes × members MiB from a thousandth of that on the wire.
 */
export function gzipBomb({ megabytes, members }: { readonly megabytes: number; readonly members: number }): Buffer {
  const member = gzipSync(Buffer.alloc(megabytes * 1024 * 1024));
  return Buffer.concat(Array.from({ length: members }, () => member));
}

/**
 * Bytes a TLS server would send: a TLS 1.2 record header of a ServerHello,
 * a truncated handshake body, then a fatal handshake_failure alert record.
 */
export const TLS_BYTES = Buffer.from([
  // Handshake record, TLS 1.2, length 42: ServerHello (2), length 38, version 3.3, 32 random bytes...
  0x16,
  0x03,
  0x03,
  0x00,
  0x2a,
  0x02,
  0x00,
  0x00,
  0x26,
  0x03,
  0x03,
  ...Array.from({ length: 32 }, (_, i) => i * 7),
  0x00,
  0x00,
  0x2f,
  0x00,
  // Alert record, TLS 1.2, length 2: fatal (2), handshake_failure (40).
  0x15,
  0x03,
  0x03,
  0x00,
  0x02,
  0x02,
  0x28,
]);
