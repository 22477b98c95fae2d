import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { refusal } from '../../net/addresses.js';

/** A connection to this address was refused by the guard (before any byte was sent). */
export class AddressRefusedError extends Error {
  readonly code = 'ERR_ADDRESS_REFUSED';

  constructor(
    readonly address: string,
    readonly range: string,
  ) {
    super(
      `address ${address} (${range}) refused: expected a public address (network.allowPrivateAddresses allows private ones, never cloud metadata addresses)`,
    );
    this.name = 'AddressRefusedError';
  }
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
      if (!first)
        return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
      return callback(null, first.address, first.family);
    });
  };
}
