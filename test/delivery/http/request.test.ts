import { createHook } from 'node:async_hooks';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HttpSender } from '../../../src/delivery/http/sender.js';
import { closedPort, httpServer, readBody, type LocalServer } from '../../helpers/http-servers.js';

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
  readonly remotePort: number | undefined;
}

let server: LocalServer;
let seen: Seen[] = [];
const sender = new HttpSender({ timeoutMs: 2000, allowPrivateAddresses: true });

beforeAll(async () => {
  server = await httpServer((request, response) => {
    void readBody(request).then((body) => {
      seen.push({
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        rawHeaders: request.rawHeaders,
        body,
        remotePort: request.socket.remotePort,
      });
      response.writeHead(204).end();
    });
  });
});
beforeEach(() => {
  seen = [];
});
afterAll(async () => {
  await sender.close();
  await server.close();
});

/** The values of a header as sent (raw, so a duplicate would show), whatever the case of its name. */
function sentValues(request: Seen, name: string): string[] {
  const values: string[] = [];
  for (let index = 0; index + 1 < request.rawHeaders.length; index += 2) {
    if (request.rawHeaders[index]?.toLowerCase() === name) values.push(request.rawHeaders[index + 1] ?? '');
  }
  return values;
}

describe('the request a receiver gets', () => {
  it('POSTs the body byte for byte to the URL path and query, with Content-Length in bytes', async () => {
    const body = JSON.stringify({
      count: 1,
      events: [
        {
          atomId: null,
          eventId: '0b7e7b0e-7d47-4f0b-9b4a-5e7c1f0a9d21',
          eventTimestamp: '2026-11-22T10:00:00.000Z',
          assetId: 42,
          assetUuid: 'c2a1f3de-0000-4000-8000-000000000001',
          eventType: 'PURGED',
        },
      ],
      webhookTimestamp: '2026-11-22T10:01:00.000Z',
      note: 'Grüße, 東京, emoji 😀, escapes \\" \u2028 and a NUL \u0000',
    });
    const result = await sender.post({ url: `${server.origin}/assets/in?tenant=acme`, body, headers: {} });
    expect(result).toMatchObject({ kind: 'response', statusCode: 204 });
    const [request] = seen;
    expect(request).toMatchObject({ method: 'POST', path: '/assets/in?tenant=acme' });
    expect(request!.body.equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(request!.headers['content-length']).toBe(String(Buffer.byteLength(body, 'utf8')));
  });

  it('sends Content-Type application/json, the X-API-Key and the configured headers exactly', async () => {
    await sender.post({
      url: `${server.origin}/hook`,
      body: '{}',
      headers: { 'X-API-Key': 'k3y-v4lue/with+symbols=', 'X-Tenant': 'acme', 'X-Trace': 'a; b=c, "d"' },
    });
    const [request] = seen;
    expect(sentValues(request!, 'content-type')).toEqual(['application/json']);
    expect(sentValues(request!, 'x-api-key')).toEqual(['k3y-v4lue/with+symbols=']);
    expect(sentValues(request!, 'x-tenant')).toEqual(['acme']);
    expect(sentValues(request!, 'x-trace')).toEqual(['a; b=c, "d"']);
  });

  it("sends User-Agent asset-webhooks/<version> of package.json when the webhook's headers set none", async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    await sender.post({ url: `${server.origin}/hook`, body: '{}', headers: { 'X-Tenant': 'acme' } });
    expect(sentValues(seen[0]!, 'user-agent')).toEqual([`asset-webhooks/${version}`]);
  });

  it.each(['User-Agent', 'user-agent', 'USER-AGENT'])(
    "sends the webhook's own User-Agent alone when its headers set one as %s",
    async (name) => {
      await sender.post({ url: `${server.origin}/hook`, body: '{}', headers: { [name]: 'acme-dam/7.1' } });
      expect(sentValues(seen[0]!, 'user-agent')).toEqual(['acme-dam/7.1']);
    },
  );

  it('keeps its own Content-Type when a caller passes one, in any case', async () => {
    await sender.post({
      url: `${server.origin}/hook`,
      body: '{}',
      headers: { 'CONTENT-TYPE': 'text/plain', 'content-Type': 'text/html' },
    });
    expect(sentValues(seen[0]!, 'content-type')).toEqual(['application/json']);
  });

  it('sends no X-API-Key when the caller gives none', async () => {
    await sender.post({ url: `${server.origin}/hook`, body: '{}', headers: {} });
    expect(seen[0]!.headers['x-api-key']).toBeUndefined();
  });

  it('reuses pooled keep-alive connections instead of opening one per delivery', async () => {
    const before = server.connections();
    for (let i = 0; i < 6; i += 1) await sender.post({ url: `${server.origin}/hook`, body: '{}', headers: {} });
    // undici may open a second connection while the first is being released; never one per request.
    const opened = server.connections() - before;
    expect(opened).toBeLessThan(6);
    expect(new Set(seen.map((request) => request.remotePort)).size).toBeLessThan(6);
  });

  it('leaves no deadline timer behind once a request is done', async () => {
    // AbortSignal.timeout() kept each request's timer until it fired or its
    // signal was collected: thousands at a time under load. Timers are counted
    // as async resources: created (init) and gone (destroy, on clearTimeout).
    const live = new Set<number>();
    const hook = createHook({
      init(id, type) {
        if (type === 'Timeout') live.add(id);
      },
      destroy(id) {
        live.delete(id);
      },
    }).enable();
    try {
      for (let i = 0; i < 40; i += 1) await sender.post({ url: `${server.origin}/hook`, body: '{}', headers: {} });
      // destroy hooks run asynchronously after clearTimeout.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      hook.disable();
    }
    expect(seen).toHaveLength(40);
    // The connections' own timers (undici's, and the local server's keep-alive
    // ones) stay: 4 here, against 45 with the timer each request left before.
    expect(live.size).toBeLessThan(10);
  });
});

describe('the API key never reaches an error message', () => {
  const key = 'sk_live_do-not-leak-0123456789';

  it('not in a transport error', async () => {
    const result = await sender.post({
      url: `http://127.0.0.1:${await closedPort()}/hook`,
      body: '{}',
      headers: { 'X-API-Key': key },
    });
    expect(result).toMatchObject({ kind: 'error', errorClass: 'connection_refused' });
    expect(JSON.stringify(result)).not.toContain(key);
  });

  it('not when the header value itself is invalid (a line break in a rotated key)', async () => {
    const result = await sender.post({
      url: `${server.origin}/hook`,
      body: '{}',
      headers: { 'X-API-Key': `${key}\r\nX-Injected: 1` },
    });
    expect(result).toMatchObject({ kind: 'error', errorClass: 'invalid_request' });
    expect(JSON.stringify(result)).not.toContain(key);
    expect(seen).toEqual([]);
  });

  it('not when the receiver name does not resolve', async () => {
    const result = await sender.post({
      url: 'http://receiver.invalid/hook',
      body: '{}',
      headers: { 'X-API-Key': key, 'X-Tenant': 'acme' },
    });
    expect(result).toMatchObject({ kind: 'error', errorClass: 'dns' });
    expect(JSON.stringify(result)).not.toContain(key);
  });
});

describe('close()', () => {
  it('waits for an in-flight request and then refuses new ones as a result, not an exception', async () => {
    const own = new HttpSender({ timeoutMs: 2000, allowPrivateAddresses: true });
    const inFlight = own.post({ url: `${server.origin}/hook`, body: '{}', headers: {} });
    await own.close();
    expect(await inFlight).toMatchObject({ kind: 'response', statusCode: 204 });
    const after = await own.post({ url: `${server.origin}/hook`, body: '{}', headers: {} });
    expect(after).toMatchObject({ kind: 'error' });
  });
});
