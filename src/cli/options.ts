import { InvalidArgumentError } from 'commander';

/** A commander option parser for an integer within a range; bad values are usage errors (exit 2). */
export function parseIntegerOption(name: string, min: number, max: number): (value: string) => number {
  return (value: string) => {
    const parsed = Number(value);
    if (!/^\d+$/.test(value) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(`${name}: expected an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return parsed;
  };
}
