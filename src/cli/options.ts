import { isIP } from 'node:net';
import { quotedPrefix } from '../text/printable.js';
import { UsageError } from './usage-error.js';

/** A commander option parser for an integer within a range; bad values are usage errors (exit 2). */
export function parseIntegerOption(name: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    const parsed = Number(value);
    if (!/^\d+$/.test(value) || parsed < min || parsed > max) {
      throw new UsageError(`${name}: expected an integer from ${min} to ${max}, got ${quotedPrefix(value)}`);
    }
    return parsed;
  };
}

const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;

/**
 * A commander option parser for an id of the asset schema (a bigint): decimal
 * digits as PostgreSQL prints them, kept as text so that ids beyond 2^53 stay
 * exact. Bad values are usage errors (exit 2).
 */
export function parseDecimalIdOption(name: string): (value: string) => string {
  return (value: string) => {
    if (!/^(0|-?[1-9][0-9]{0,18})$/.test(value) || BigInt(value) < INT8_MIN || BigInt(value) > INT8_MAX) {
      throw new UsageError(
        `${name}: expected an integer from ${INT8_MIN} to ${INT8_MAX} in decimal digits, got ${quotedPrefix(value)}`,
      );
    }
    return value;
  };
}

const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/**
 * A commander option parser for an address to listen on: an IPv4 or IPv6
 * address, or a host name (such as localhost). Bad values are usage errors (exit 2).
 */
export function parseHostOption(name: string): (value: string) => string {
  return (value: string) => {
    if (isIP(value) === 0 && !HOST_NAME.test(value)) {
      throw new UsageError(
        `${name}: expected an IP address (such as 0.0.0.0, :: or 127.0.0.1) or a host name, got ${quotedPrefix(value)}`,
      );
    }
    return value;
  };
}
