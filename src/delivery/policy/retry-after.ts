/**
 * The moment a `Retry-After` response header asks for, read at `now`: either
 * delay-seconds (a non-negative integer) or an HTTP date. Null when the
 * header is absent or neither form; a date in the past means "now".
 */
export function parseRetryAfter(header: string | undefined, now: Date): Date | null {
  if (header === undefined) return null;
  const value = header.trim();
  if (/^\d+$/.test(value)) return new Date(now.getTime() + Number(value) * 1000);
  // HTTP dates (IMF-fixdate and the two obsolete forms) name their weekday and zone.
  if (!/^[A-Za-z]{3,9},? /.test(value) || !/GMT$/.test(value)) return null;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return null;
  return new Date(Math.max(at, now.getTime()));
}
