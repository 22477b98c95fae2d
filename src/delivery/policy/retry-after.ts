/**
 * The moment a `Retry-After` response header asks for, read at `now`, or
 * null when it asks for nothing we accept. The header is the receiver's
 * data: every value is either a valid, bounded moment or absent, never an
 * error nor an invalid Date.
 *
 * Accepted (RFC 9110, section 10.2.3), with optional spaces or tabs around:
 * - delay-seconds: ASCII digits only. A value too large to represent counts
 *   as MAX_DELAY_SECONDS, as RFC 9111 bids caches do with delta-seconds;
 *   `0` is now.
 * - an HTTP date in IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) or the
 *   obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`). A date in the
 *   past (before 1970 included) is now; a far future one is kept as it is
 *   (the retry policy caps what it honours: MAX_RETRY_AFTER_SECONDS).
 *
 * Absent: no header, an empty one, several values (repeated headers, which
 * arrive comma-joined, whether equal or not: the receiver did not say one
 * thing), a negative or fractional number, any other text, a value longer
 * than MAX_HEADER_LENGTH, non-ASCII, and asctime dates (no zone, so their
 * moment is a guess).
 */
export function parseRetryAfter(header: string | undefined, now: Date): Date | null {
  const at = now.getTime();
  if (header === undefined || header.length > MAX_HEADER_LENGTH || !Number.isFinite(at)) return null;
  const value = header.replace(/^[ \t]+|[ \t]+$/g, '');
  if (/^[0-9]+$/.test(value)) return new Date(at + Math.min(Number(value), MAX_DELAY_SECONDS) * 1000);
  if (!IMF_FIXDATE.test(value) && !RFC850_DATE.test(value)) return null;
  const asked = Date.parse(value);
  if (!Number.isFinite(asked)) return null;
  return new Date(Math.max(asked, at));
}

/** RFC 9111's value for a delta-seconds greater than a cache can represent. */
export const MAX_DELAY_SECONDS = 2 ** 31;

/** Longer than any valid value (an RFC 850 date is 30 characters). */
const MAX_HEADER_LENGTH = 64;

const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '[0-9]{2}:[0-9]{2}:[0-9]{2}';
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} ${MONTH} [0-9]{4} ${TIME} GMT$`);
const RFC850_DATE = new RegExp(
  `^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), [0-9]{2}-${MONTH}-[0-9]{2} ${TIME} GMT$`,
);
