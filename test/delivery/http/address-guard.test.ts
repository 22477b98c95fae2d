import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddressRefusedError, guardedLookup } from '../../../src/delivery/http/address-guard.js';
import { HttpSender } from '../../../src/delivery/http/sender.js';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { httpServer, PAYLOAD, readBody, type LocalServer } from '../../helpers/http-servers.js';

describe('the lookup the HTTP client connects through', () => {
  const lookup = (hostname: string, allowPrivate: boolean, all: boolean) =>
    new Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[] }>((resolve) => {
      guardedLookup(allowPrivate)(hostname, { all }, (error, address) => resolve({ error, address }));
    });

  it('refuses a name that resolves to a loopback address', async () => {
    const { error } = await lookup('localhost', false, true);
    expect(error).toBeInstanceOf(AddressRefusedError);
    expect(error).toMatchObject({ address: '127.0.0.1', range: 'loopback' });
  });

  it('hands back the addresses it checked when they are allowed, in the shape asked for', async () => {
    expect(await lookup('localhost', true, true)).toMatchObject({
      error: null,
      address: [{ address: '127.0.0.1', family: 4 }],
    });
    expect(await lookup('localhost', true, false)).toMatchObject({ error: null, address: '127.0.0.1' });
  });

  it('passes a resolution failure through', async () => {
    const { error } = await lookup('receiver.invalid', true, true);
    expect(error?.code).toBe('ENOTFOUND');
  });
});

describe('the sender refuses before connecting', () => {
  let server: LocalServer;
  const strict = new HttpSender({ timeoutMs: 1000, allowPrivateAddresses: false });
  const allowing = new HttpSender({ timeoutMs: 1000, allowPrivateAddresses: true });

  beforeAll(async () => {
    server = await httpServer((request, response) => {
      void readBody(request).then(() => response.writeHead(200).end('ok'));
    });
  });
  afterAll(async () => {
    await Promise.all([strict.close(), allowing.close()]);
    await server.close();
  });

  const post = (sender: HttpSender, url: string) => sender.post({ url, body: PAYLOAD, headers: {} });

  it.each([
    [
      'a hostname that resolves to 127.0.0.1 (checked after resolution)',
      (port: number) => `http://localhost:${port}/hook`,
    ],
    ['a loopback literal', (port: number) => `http://127.0.0.1:${port}/hook`],
    ['an IPv4-mapped IPv6 literal of loopback', (port: number) => `http://[::ffff:127.0.0.1]:${port}/hook`],
    ['a loopback literal in another notation', (port: number) => `http://0x7f.1:${port}/hook`],
  ])('%s is refused, and reached once private addresses are allowed', async (_name, url) => {
    const before = server.connections();
    const refused = await post(strict, url(server.port));
    expect(refused).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
    expect(classifyResponse(refused)).toBe('retryable');
    expect(server.connections()).toBe(before);

    expect(await post(allowing, url(server.port))).toMatchObject({ kind: 'response', statusCode: 200 });
  });

  it.each([
    ['a private address', 'http://10.1.2.3/hook', /address 10\.1\.2\.3 \(private\) refused/],
    ['a link-local address', 'http://169.254.1.1/hook', /address 169\.254\.1\.1 \(linkLocal\) refused/],
    ['a unique-local IPv6 address', 'http://[fd12::1]/hook', /address fd12::1 \(uniqueLocal\) refused/],
    ['carrier-grade NAT', 'http://100.64.1.1/hook', /address 100\.64\.1\.1 \(carrierGradeNat\) refused/],
    [
      'an IPv4-compatible IPv6 literal of loopback',
      'http://[::127.0.0.1]/hook',
      /address ::7f00:1 \(loopback\) refused/,
    ],
    ['a 6to4 literal of a private address', 'http://[2002:a00:1::1]/hook', /address 2002:a00:1::1 \(private\) refused/],
  ])('%s is refused with a message naming the address and its range', async (_name, url, message) => {
    const result = await post(strict, url);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
    expect(result.kind === 'error' && result.message).toMatch(message);
  });

  it.each([
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'http://[::ffff:169.254.169.254]/computeMetadata/v1/',
    'http://[fd00:ec2::254]/latest/meta-data/',
    'http://[::a9fe:a9fe]/latest/meta-data/',
    'http://[2002:a9fe:a9fe::]/latest/meta-data/',
    'http://[64:ff9b:1::a9fe:a9fe]/latest/meta-data/',
    'http://100.100.100.200/latest/meta-data/',
  ])('the metadata address %s is refused even when private addresses are allowed', async (url) => {
    for (const sender of [strict, allowing]) {
      const result = await post(sender, url);
      expect(result).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
      expect(result.kind === 'error' && result.message).toMatch(/cloud metadata address/);
    }
  });
});
