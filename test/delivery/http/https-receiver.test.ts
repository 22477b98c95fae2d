import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { useTempDirectories } from '../../helpers/temp-directories.js';

/**
 * An https receiver that offers HTTP/2 by ALPN (as most TLS servers and
 * proxies do) is spoken to over HTTP/1.1, the protocol whose timeouts, body
 * limit and misbehaviours the sender is specified and tested on. The sender
 * runs in a child process from dist/, which trusts the test's own certificate
 * through NODE_EXTRA_CA_CERTS (read only when a process starts).
 */
const sender = fileURLToPath(new URL('../../../dist/delivery/http/sender.js', import.meta.url));
const temp = useTempDirectories();
let server: Http2SecureServer;
let certificate = '';
const versions: string[] = [];

beforeAll(async () => {
  const directory = temp('aw-https-receiver-');
  const key = path.join(directory, 'key.pem');
  certificate = path.join(directory, 'cert.pem');
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
    '-keyout',
    key,
    '-out',
    certificate,
  ]);
  server = createSecureServer(
    { key: readFileSync(key), cert: readFileSync(certificate), allowHTTP1: true },
    (request, response) => {
      versions.push(request.httpVersion);
      request.resume();
      request.on('end', () => response.writeHead(200).end('ok'));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

it('posts to an https receiver that offers h2 over HTTP/1.1', async () => {
  const { port } = server.address() as AddressInfo;
  const script = `
    const { HttpSender } = await import(${JSON.stringify(sender)});
    const sender = new HttpSender({ timeoutMs: 5000, allowPrivateAddresses: true });
    const result = await sender.post({ url: 'https://127.0.0.1:${port}/hook', body: '{}', headers: {} });
    await sender.close();
    process.stdout.write(JSON.stringify(result));
  `;
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: certificate },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('close', () => {
      clearTimeout(timer);
      resolve(stdout);
    });
  });
  expect(JSON.parse(output)).toMatchObject({ kind: 'response', statusCode: 200, responseExcerpt: 'ok' });
  expect(versions).toEqual(['1.1']);
});
