/**
 * The text of a one-dimensional PostgreSQL array literal of `values`, as
 * array_in reads it. Numbers and booleans are written as they are, null as
 * NULL, strings always in double quotes (so that an empty string, "NULL" or
 * one with braces, commas or spaces stays the string it is) with `"` and `\`
 * escaped by a backslash.
 *
 * unnestColumns (src/db/columns.ts) sends each column of a chunk's events as
 * one such literal, rather than as an array for node-postgres to serialize:
 * node-postgres quotes and escapes every element with two regular
 * expressions, on the coalescer's hot path, where this escapes only the
 * strings that hold a quote or a backslash; and it writes a list of lists as
 * one multidimensional array, which must be rectangular, where an event's
 * lists (see listLiteral) differ in length.
 */
export function arrayLiteral(values: ReadonlyArray<string | number | boolean | null>): string {
  let text = '{';
  for (let i = 0; i < values.length; i += 1) {
    const value = values[i]!;
    if (i > 0) text += ',';
    text +=
      typeof value === 'string'
        ? quoted(value)
        : value === null
          ? 'NULL'
          : typeof value === 'boolean'
            ? value
              ? 't'
              : 'f'
            : String(value);
  }
  return `${text}}`;
}

/** One event's list as an element of a column: arrayLiteral, or null for null or an empty list (the events table stores those as null). */
export function listLiteral(values: ReadonlyArray<string | number> | null): string | null {
  return values === null || values.length === 0 ? null : arrayLiteral(values);
}

function quoted(value: string): string {
  return NEEDS_ESCAPE.test(value) ? `"${value.replace(ESCAPED, '\\$&')}"` : `"${value}"`;
}

const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;
