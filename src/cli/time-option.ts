import { quotedPrefix } from '../text/printable.js';
import { UsageError } from './usage-error.js';

// An ISO-8601 date, optionally with a time and an offset; without an offset it is UTC.
const ISO_TIME = /^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?)?(Z|[+-]\d\d(?::?\d\d)?)?$/i;

/** A commander option parser for a time (`events --from/--to`, `dead-letters redeliver --from/--to`); bad values are usage errors (exit 2). */
export function parseTime(name: string): (value: string) => Date {
  return (value) => {
    const refuse = (): never => {
      throw new UsageError(
        `${name}: expected an ISO-8601 time such as 2026-11-22T09:00:00Z (UTC when no offset is given), got ${quotedPrefix(value)}`,
      );
    };
    const match = ISO_TIME.exec(value.trim()) ?? refuse();
    const [year, month, day, hour = 0, minute = 0, second = 0] = match
      .slice(1, 7)
      .map((part) => (part === undefined ? undefined : Number(part)));
    const fields = [year!, month! - 1, day!, hour, minute, second] as const;
    const milliseconds = Number((match[7] ?? '0').padEnd(3, '0').slice(0, 3));
    const utc = new Date(Date.UTC(...fields, milliseconds));
    // Date.UTC rolls 2026-02-30 over into March: a field that changed was out of range.
    const back = [
      utc.getUTCFullYear(),
      utc.getUTCMonth(),
      utc.getUTCDate(),
      utc.getUTCHours(),
      utc.getUTCMinutes(),
      utc.getUTCSeconds(),
    ];
    if (back.some((field, index) => field !== fields[index])) refuse();
    const offset = match[8] ?? 'Z';
    if (offset.toUpperCase() === 'Z') return utc;
    const [, sign, offsetHours, offsetMinutes = '0'] = /^([+-])(\d\d):?(\d\d)?$/.exec(offset)!;
    if (Number(offsetHours) > 23 || Number(offsetMinutes) > 59) refuse();
    const offsetMs = (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000 * (sign === '-' ? -1 : 1);
    return new Date(utc.getTime() - offsetMs);
  };
}
