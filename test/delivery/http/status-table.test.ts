import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpSender } from '../../../src/delivery/http/sender.js';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { httpServer, PAYLOAD, readBody, type LocalServer } from '../../helpers/http-servers.js';

/**
 * What the receiver does, by path:
 *   /status/N          answers N
 *   /info/I/N          sends the informational response I (100, 102 or 103), then N
 *   /info/I            sends I and never a final response
 *   /redirect/N        answers N with Location: /target (which counts its hits)
 */
let server: LocalServer;
let targetHits = 0;
const sender = new HttpSender({ timeoutMs: 1000, allowPrivateAddresses: true });

function informational(response: ServerResponse, code: number): void {
  if (code === 100) response.writeContinue();
  else if (code === 102) response.writeProcessing();
  else if (code === 103) response.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
  else throw new Error(`no way to send ${code}`);
}

beforeAll(async () => {
  server = await httpServer((request, response) => {
    void readBody(request).then(() => {
      const [, kind, first, second] = (request.url ?? '').split('/');
      if (kind === 'target') {
        targetHits += 1;
        response.writeHead(200).end('target');
      } else if (kind === 'status') {
        response.writeHead(Number(first), { 'content-type': 'text/plain' }).end(`answered ${first}`);
      } else if (kind === 'redirect') {
        response.writeHead(Number(first), { location: '/target' }).end();
      } else if (kind === 'info') {
        informational(response, Number(first));
        // The final response, if any, follows on a later turn of the event loop.
        if (second) setTimeout(() => response.writeHead(Number(second)).end(`answered ${second}`), 20);
      }
    });
  });
});
afterAll(async () => {
  await sender.close();
  await server.close();
});

const post = (path: string) => sender.post({ url: `${server.origin}${path}`, body: PAYLOAD, headers: {} });

describe('every status class against a real receiver, through the sender and the classification', () => {
  it.each([
    [200, 'delivered'],
    [201, 'delivered'],
    [202, 'delivered'],
    [204, 'delivered'],
    [299, 'delivered'],
    [300, 'retryable'],
    [304, 'retryable'],
    [400, 'rejected'],
    [401, 'rejected'],
    [403, 'rejected'],
    [404, 'rejected'],
    [410, 'rejected'],
    [413, 'rejected'],
    [429, 'rejected'],
    [499, 'rejected'],
    [500, 'retryable'],
    [502, 'retryable'],
    [503, 'retryable'],
    [504, 'retryable'],
    [599, 'retryable'],
  ] as const)('a receiver answering %i: %s', async (status, expected) => {
    const result = await post(`/status/${status}`);
    expect(result).toMatchObject({ kind: 'response', statusCode: status });
    expect(classifyResponse(result)).toBe(expected);
  });

  it.each([600, 999])(
    'a receiver answering %i, a status HTTP does not define: invalid_response, retryable',
    async (status) => {
      const result = await post(`/status/${status}`);
      expect(result).toMatchObject({ kind: 'error', errorClass: 'invalid_response' });
      expect(classifyResponse(result)).toBe('retryable');
    },
  );

  it('keeps the start of the response body as the excerpt', async () => {
    expect(await post('/status/503')).toMatchObject({
      kind: 'response',
      statusCode: 503,
      responseExcerpt: 'answered 503',
    });
  });
});

describe('informational (1xx) responses', () => {
  it.each([
    [102, 201, 'delivered'],
    [103, 200, 'delivered'],
    [103, 503, 'retryable'],
    [103, 404, 'rejected'],
  ] as const)('%i followed by %i: the final status decides (%s)', async (info, final, expected) => {
    const result = await post(`/info/${info}/${final}`);
    expect(result).toMatchObject({ kind: 'response', statusCode: final });
    expect(classifyResponse(result)).toBe(expected);
  });

  it('100 Continue, even followed by 200, is an unsolicited response the client drops: invalid_response, retried', async () => {
    // undici never sends Expect: 100-continue, so it treats any 100 as a protocol violation.
    for (const path of ['/info/100/200', '/info/100']) {
      const result = await post(path);
      expect(result).toMatchObject({ kind: 'error', errorClass: 'invalid_response' });
      expect(classifyResponse(result)).toBe('retryable');
    }
  });

  it('103 never followed by a final status ends as a timeout, retried', async () => {
    const result = await post('/info/103');
    expect(result).toMatchObject({ kind: 'error', errorClass: 'timeout' });
    expect(classifyResponse(result)).toBe('retryable');
  });
});

describe('redirects', () => {
  it.each([301, 302, 303, 307, 308])(
    '%i is returned as a status and its Location is never requested',
    async (status) => {
      const before = targetHits;
      const result = await post(`/redirect/${status}`);
      expect(result).toMatchObject({ kind: 'response', statusCode: status });
      expect(classifyResponse(result)).toBe('retryable');
      expect(targetHits).toBe(before);
    },
  );
});
