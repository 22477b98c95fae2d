/**
 * Text from outside the program (the database, a configuration document, a
 * receiver's answer) made safe to print on a terminal or in a one-line
 * message. A terminal acts on control characters rather than showing them:
 * ESC starts a sequence that recolours or moves the cursor, CR and LF start a
 * line that looks like the program's own, and the bidirectional controls
 * reorder what follows. Each is written as a visible escape instead.
 */

/**
 * C0 controls (U+0000-U+001F), DEL (U+007F), C1 controls (U+0080-U+009F), the
 * bidirectional embeddings, overrides and isolates (U+202A-U+202E,
 * U+2066-U+2069), the line and paragraph separators (U+2028, U+2029), the
 * implicit direction marks (U+200E, U+200F, U+061C), and lone surrogates.
 */
const UNPRINTABLE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\u001b': '\\e' };

/** `text` with every character a terminal would act on written as an escape (`\e`, `\n`, `\u202e`, ...); the rest unchanged. */
export function printable(text: string): string {
  return text.replace(
    UNPRINTABLE,
    (character) => NAMED[character] ?? `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Characters of a found value a message quotes; past them it is cut and ends with `...`. */
export const QUOTED_PREFIX_LENGTH = 40;

/**
 * A found value for a one-line message: JSON-quoted and escaped (every
 * control, bidirectional and separator character as a `\u` escape), at most
 * QUOTED_PREFIX_LENGTH characters of it, and `...` after the quote when it was
 * cut. A message never carries a whole value: it may be a line of a file that
 * is not a configuration document at all (a password file, say), or megabytes.
 */
export function quotedPrefix(value: string, length: number = QUOTED_PREFIX_LENGTH): string {
  const characters = Array.from(value.slice(0, (length + 1) * 2));
  const cut = characters.length > length;
  const quoted = JSON.stringify(characters.slice(0, length).join('')).replace(
    UNPRINTABLE,
    (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return cut ? `${quoted}...` : quoted;
}

/**
 * A copy of `value` with printable() applied to every string in it, through
 * arrays and plain objects (keys included); other values (numbers, dates,
 * bigints) as they are. For a text output rendered from data of the
 * database, a document or a receiver: each value is escaped before the
 * renderer puts it on a line, so a value's line break cannot start a line of
 * its own. (`--json` output is escaped by JSON itself.)
 */
export function printableValues<T>(value: T): T {
  if (typeof value === 'string') return printable(value) as T;
  if (Array.isArray(value)) return value.map((entry: unknown) => printableValues(entry)) as T;
  if (value !== null && typeof value === 'object') {
    const prototype = Object.getPrototypeOf(value) as unknown;
    if (prototype !== Object.prototype && prototype !== null) return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, entry]) => [printable(key), printableValues(entry as unknown)]),
    ) as T;
  }
  return value;
}
