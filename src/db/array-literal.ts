/**
 * The text of a one-dimensional PostgreSQL array literal of `values` (what
 * array_in reads), or null for null or an empty list (which the events table
 * stores as null). For a list that is itself an element of an array
 * parameter, one value of a `text[]` that PostgreSQL casts row by row:
 * node-postgres serializes a parameter's arrays, but writes a list of lists as
 * one multidimensional array, which must be rectangular.
 *
 * Numbers are written as they are; strings always in double quotes, so that
 * an empty string, "NULL" or one with braces, commas or spaces stays the
 * string it is, with `"` and `\` escaped by a backslash.
 */
export function arrayLiteral(values: ReadonlyArray<string | number> | null): string | null {
  if (values === null || values.length === 0) return null;
  let text = '{';
  for (let i = 0; i < values.length; i += 1) {
    const value = values[i]!;
    if (i > 0) text += ',';
    text += typeof value === 'number' ? String(value) : quoted(value);
  }
  return `${text}}`;
}

function quoted(value: string): string {
  return NEEDS_ESCAPE.test(value) ? `"${value.replace(ESCAPED, '\\$&')}"` : `"${value}"`;
}

const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;
