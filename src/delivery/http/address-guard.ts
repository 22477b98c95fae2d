import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import ipaddr from 'ipaddr.js';

/**
 * Cloud metadata endpoints (AWS, GCP, Azure and most others on IPv4; AWS on
 * IPv6). Refused always, whatever network.allowPrivateAddresses says: a
 * webhook URL must never be a way to read the instance's credentials.
 */
const METADATA = [ipaddr.parseCIDR('169.254.169.254/32'), ipaddr.parseCIDR('fd00:ec2::254/128')] as const;

/** NAT64 (RFC 6052): the last 32 bits are an IPv4 address the gateway connects to. */
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');

/**
 * The ipaddr.js range names that are public, routable unicast. Every other
 * range (loopback, private, linkLocal, uniqueLocal, carrierGradeNat,
 * unspecified, multicast, broadcast, reserved, 6to4, teredo, rfc6052, ...) is
 * refused unless private addresses are allowed: an allow-list, so a range
 * ipaddr.js learns later is refused until someone decides otherwise.
 */
const PUBLIC_RANGES: ReadonlySet<string> = new Set(['unicast']);

/** A connection to this address was refused by the guard (before any byte was sent). */
export class AddressRefusedError extends Error {
  readonly code = 'ERR_ADDRESS_REFUSED';

  constructor(readonly address: string, readonly range: string) {
    super(`address ${address} (${range}) refused: expected a public address (network.allowPrivateAddresses allows private ones, never the cloud metadata address)`);
    this.name = 'AddressRefusedError';
  }
}

/**
 * Why the IP address may not be connected to, or null when it may.
 *
 * - The cloud metadata address is refused always (also as an IPv4-mapped or
 *   NAT64 IPv6 address).
 * - Unless allowPrivate: anything but public unicast is refused: loopback,
 *   private (10/8, 172.16/12, 192.168/16), link-local, unique-local IPv6,
 *   carrier-grade NAT, unspecified, multicast, broadcast and reserved ranges.
 *   An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4
 *   address it carries.
 * - Something that is not an IP address is refused ('not an IP address').
 */
export function refusal(address: string, allowPrivate: boolean): string | null {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  // process() turns ::ffff:a.b.c.d into the IPv4 address it carries.
  const parsed = ipaddr.process(address);
  if (isMetadata(parsed)) return 'cloud metadata address';
  if (allowPrivate) return null;
  const range = parsed.range();
  return PUBLIC_RANGES.has(range) ? null : range;
}

function isMetadata(parsed: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  if (METADATA.some(([network, bits]) => parsed.kind() === network.kind() && parsed.match(network, bits))) return true;
  if (parsed.kind() === 'ipv6' && parsed.match(NAT64)) {
    const embedded = ipaddr.fromByteArray(parsed.toByteArray().slice(12));
    return isMetadata(embedded);
  }
  return false;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A dns.lookup for the connect options of the HTTP client. It resolves the
 * name and refuses the connection when any address the name resolves to is
 * refused. Because the socket connects to exactly the addresses this function
 * hands back, the address checked is the address connected to: a name that
 * resolves differently a moment later (DNS rebinding) cannot slip past.
 *
 * Refusing the whole name (rather than dropping the bad addresses) is
 * deliberate: a public name that also resolves to a private address is a
 * misconfiguration or an attack, and both should show up as `address_refused`.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      for (const entry of addresses) {
        const reason = refusal(entry.address, allowPrivate);
        if (reason !== null) return callback(new AddressRefusedError(entry.address, reason), '', 0);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
      return callback(null, first.address, first.family);
    });
  };
}
