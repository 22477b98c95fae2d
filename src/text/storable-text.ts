/**
 * Text that PostgreSQL can always store in a `text` column of a UTF-8
 * database: NUL (which no text value may hold) and lone UTF-16 surrogates
 * (which have no UTF-8 form) become U+FFFD. Every string an attempt records
 * that came from a receiver or a library (the response excerpt, an error
 * message) goes through it, so that what a receiver answers can never make
 * the statement that records it fail.
 */
export function storableText(text: string): string;
export function storableText(text: string | null): string | null;
export function storableText(text: string | null): string | null {
  if (text === null) return null;
  return text.replace(UNSTORABLE, '\uFFFD');
}

/** NUL, a high surrogate not followed by a low one, a low surrogate not preceded by a high one (UTF-16 code units). */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Bytes as storable text: decoded as UTF-8 (a byte sequence that is not valid
 * UTF-8 becomes U+FFFD), then as {@link storableText}.
 */
export function storableBytes(bytes: Buffer): string {
  return storableText(bytes.toString('utf8'));
}
