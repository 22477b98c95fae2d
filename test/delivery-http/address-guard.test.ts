import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddressRefusedError, guardedLookup, refusal } from '../../src/delivery/http/address-guard.js';
import { HttpSender } from '../../src/delivery/http/sender.js';
import { classifyResponse } from '../../src/delivery/policy/classify.js';
import { httpServer, PAYLOAD, readBody, type LocalServer } from './servers.js';

describe('which addresses may be connected to', () => {
  it.each([
    // address, refused as (allowPrivateAddresses false), refused as (true)
    ['127.0.0.1', 'loopback', null],
    ['127.255.255.254', 'loopback', null],
    ['::1', 'loopback', null],
    ['10.1.2.3', 'private', null],
    ['172.16.0.1', 'private', null],
    ['172.31.255.255', 'private', null],
    ['192.168.1.1', 'private', null],
    ['169.254.1.1', 'linkLocal', null],
    ['fe80::1', 'linkLocal', null],
    ['fd12:3456::1', 'uniqueLocal', null],
    ['fc00::1', 'uniqueLocal', null],
    ['100.64.0.1', 'carrierGradeNat', null],
    ['0.0.0.0', 'unspecified', null],
    ['::', 'unspecified', null],
    ['224.0.0.1', 'multicast', null],
    ['ff02::1', 'multicast', null],
    ['255.255.255.255', 'broadcast', null],
    ['192.0.2.1', 'reserved', null],
    ['240.0.0.1', 'reserved', null],
    ['::ffff:127.0.0.1', 'loopback', null],
    ['::ffff:7f00:1', 'loopback', null],
    ['::ffff:10.0.0.1', 'private', null],
    ['::ffff:192.168.0.1', 'private', null],
    ['64:ff9b::7f00:1', 'rfc6052', null],
    ['2002:7f00:1::1', '6to4', null],
    ['169.254.169.254', 'cloud metadata address', 'cloud metadata address'],
    ['::ffff:169.254.169.254', 'cloud metadata address', 'cloud metadata address'],
    ['::ffff:a9fe:a9fe', 'cloud metadata address', 'cloud metadata address'],
    ['64:ff9b::a9fe:a9fe', 'cloud metadata address', 'cloud metadata address'],
    ['fd00:ec2::254', 'cloud metadata address', 'cloud metadata address'],
    ['fd00:0ec2:0:0:0:0:0:0254', 'cloud metadata address', 'cloud metadata address'],
    ['8.8.8.8', null, null],
    ['93.184.216.34', null, null],
    ['172.32.0.1', null, null],
    ['100.128.0.1', null, null],
    ['2606:4700:4700::1111', null, null],
    ['::ffff:8.8.8.8', null, null],
    ['receiver.example.com', 'not an IP address', 'not an IP address'],
  ] as const)('%s: %s, or %s when private addresses are allowed', (address, strict, allowing) => {
    expect(refusal(address, false)).toBe(strict);
    expect(refusal(address, true)).toBe(allowing);
  });
});

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
    expect(await lookup('localhost', true, true)).toMatchObject({ error: null, address: [{ address: '127.0.0.1', family: 4 }] });
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
    ['a hostname that resolves to 127.0.0.1 (checked after resolution)', (port: number) => `http://localhost:${port}/hook`],
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
  ])('%s is refused with a message naming the address and its range', async (_name, url, message) => {
    const result = await post(strict, url);
    expect(result).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
    expect(result.kind === 'error' && result.message).toMatch(message);
  });

  it.each([
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'http://[::ffff:169.254.169.254]/computeMetadata/v1/',
    'http://[fd00:ec2::254]/latest/meta-data/',
  ])('the metadata address %s is refused even when private addresses are allowed', async (url) => {
    for (const sender of [strict, allowing]) {
      const result = await post(sender, url);
      expect(result).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
      expect(result.kind === 'error' && result.message).toMatch(/cloud metadata address/);
    }
  });
});
