import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import ipaddr from 'ipaddr.js';

/** Cloud metadata endpoints: refused always, whatever allowPrivateAddresses says. */
const ALWAYS_REFUSED = new Set(['169.254.169.254', 'fd00:ec2::254']);

/** ipaddr.js range names that are public, routable unicast. */
const PUBLIC_RANGES = new Set(['unicast']);

export class AddressRefusedError extends Error {
  constructor(readonly address: string, readonly range: string) {
    super(`address ${address} (${range}) refused: expected a public address (set network.allowPrivateAddresses to allow private ones)`);
    this.name = 'AddressRefusedError';
  }
}

/**
 * Why an IP address may not be connected to, or null when it may. Loopback,
 * private, link-local, unique-local, carrier-grade NAT, multicast and the
 * like are refused unless allowPrivate; IPv4-mapped IPv6 addresses are judged
 * as the IPv4 address they carry; the metadata address is always refused.
 */
export function refusal(address: string, allowPrivate: boolean): string | null {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  const parsed = ipaddr.process(address);
  const normalized = parsed.toString();
  if (ALWAYS_REFUSED.has(normalized)) return 'cloud metadata address';
  if (allowPrivate) return null;
  const range = parsed.range();
  return PUBLIC_RANGES.has(range) ? null : range;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A dns.lookup for the HTTP client's connect options: resolves the name and
 * refuses the connection when an address it would connect to is refused, so the
 * address checked is the address connected to.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as LookupAddress[];
      for (const entry of list) {
        const reason = refusal(entry.address, allowPrivate);
        if (reason !== null) return callback(new AddressRefusedError(entry.address, reason), '', 0);
      }
      if (options.all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
      return callback(null, first.address, first.family);
    });
  };
}
