import { describe, expect, it } from 'vitest';
import { refusal } from '../../src/net/addresses.js';

const METADATA = 'cloud metadata address';

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
    ['8.8.8.8', null, null],
    ['93.184.216.34', null, null],
    ['172.32.0.1', null, null],
    ['100.128.0.1', null, null],
    ['2606:4700:4700::1111', null, null],
    ['receiver.example.com', 'not an IP address', 'not an IP address'],
  ] as const)('%s: %s, or %s when private addresses are allowed', (address, strict, allowing) => {
    expect(refusal(address, false)).toBe(strict);
    expect(refusal(address, true)).toBe(allowing);
  });
});

describe('an IPv6 address that carries an IPv4 address is judged as that IPv4 address', () => {
  it.each([
    // IPv4-mapped ::ffff:0:0/96
    ['::ffff:127.0.0.1', 'loopback', null],
    ['::ffff:7f00:1', 'loopback', null],
    ['::ffff:10.0.0.1', 'private', null],
    ['::ffff:192.168.0.1', 'private', null],
    ['::ffff:8.8.8.8', null, null],
    // IPv4-translated ::ffff:0:0:0/96
    ['::ffff:0:7f00:1', 'loopback', null],
    ['::ffff:0:808:808', null, null],
    // IPv4-compatible ::/96 (as WHATWG URL writes [::127.0.0.1])
    ['::7f00:1', 'loopback', null],
    ['::a00:1', 'private', null],
    ['::808:808', null, null],
    // NAT64, well-known prefix 64:ff9b::/96
    ['64:ff9b::7f00:1', 'loopback', null],
    ['64:ff9b::c0a8:1', 'private', null],
    ['64:ff9b::808:808', null, null],
    // NAT64, local-use prefix 64:ff9b:1::/48: not routed beyond its network
    ['64:ff9b:1::808:808', 'rfc6052', null],
    ['64:ff9b:1::7f00:1', 'rfc6052', null],
    // 6to4 2002::/16
    ['2002:7f00:1::1', 'loopback', null],
    ['2002:c0a8:101::1', 'private', null],
    ['2002:808:808::1', null, null],
    // Teredo 2001::/32: the client address, bits inverted, in the last 32 bits (8.8.8.8 and 127.0.0.1 here)
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', null, null],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'loopback', null],
  ] as const)('%s: %s, or %s when private addresses are allowed', (address, strict, allowing) => {
    expect(refusal(address, false)).toBe(strict);
    expect(refusal(address, true)).toBe(allowing);
  });
});

describe('cloud metadata addresses are refused in every form, whatever allowPrivateAddresses says', () => {
  it.each([
    '169.254.169.254',
    '169.254.170.2',
    '169.254.170.23',
    '169.254.0.23',
    '100.100.100.200',
    '168.63.129.16',
    '192.0.0.192',
    'fd00:ec2::254',
    'fd00:0ec2:0:0:0:0:0:0254',
    'fd00:ec2::23',
    // 169.254.169.254 carried by IPv6
    '::ffff:169.254.169.254',
    '::ffff:a9fe:a9fe',
    '::ffff:0:a9fe:a9fe',
    '::a9fe:a9fe',
    '64:ff9b::a9fe:a9fe',
    '2002:a9fe:a9fe::',
    '2002:a9fe:a9fe:1::1',
    '2001:0:4136:e378:8000:63bf:5601:5601',
    // local-use NAT64, at each position RFC 6052 allows for a /48, /56, /64 and /96 prefix
    '64:ff9b:1:a9fe:a9:fe00::',
    '64:ff9b:1:a9:fe:a9fe::',
    '64:ff9b:1:0:a9:fea9:fe00:0',
    '64:ff9b:1::a9fe:a9fe',
    // 100.100.100.200 carried by IPv6
    '::ffff:6464:64c8',
    '::6464:64c8',
    '64:ff9b::6464:64c8',
    '64:ff9b:1::6464:64c8',
    '2002:6464:64c8::1',
  ])('%s', (address) => {
    expect(refusal(address, false)).toBe(METADATA);
    expect(refusal(address, true)).toBe(METADATA);
  });
});
