import { InvalidArgumentError } from 'commander';

/** A commander option parser for an integer within a range; bad values are usage errors (exit 2). */
export function parseIntegerOption(name: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    const parsed = Number(value);
    if (!/^\d+$/.test(value) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(
        `${name}: expected an integer from ${min} to ${max}, got ${JSON.stringify(value)}`,
      );
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
      throw new InvalidArgumentError(
        `${name}: expected an integer from ${INT8_MIN} to ${INT8_MAX} in decimal digits, got ${JSON.stringify(value)}`,
      );
    }
    return value;
  };
}
