/**
 * SQL for a timestamptz as the text of a payload's `eventTimestamp` (ISO-8601
 * UTC, milliseconds, `Z`). Every place that writes or compares that text
 * builds it here: a mirror digest equals a receiver's only if the set's
 * times read exactly as the payloads carried them.
 */
export function eventTimestampText(expression: string): string {
  return `to_char(${expression} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}
