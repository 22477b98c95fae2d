/**
 * Request header values (the API key, an Authorization header) never reach
 * an attempt record, a log or an error: whatever the receiver echoes in its
 * response and whatever undici or Node put in an error message is scrubbed
 * of them, in every form secretForms lists, before it is kept.
 */

/** Header values shorter than this are not scrubbed from messages (they would mangle ordinary words). */
const MIN_REDACTED_LENGTH = 4;

const REDACTED = Buffer.from('[redacted]');

/**
 * The byte forms in which a request header value (the API key, an
 * Authorization header) can come back from a receiver or a library: as sent
 * (UTF-8 and ISO-8859-1), escaped in a JSON string, percent-encoded and
 * form-encoded. Longest first, so a longer form is replaced before a form it
 * contains. A value shorter than MIN_REDACTED_LENGTH is not a secret worth
 * mangling ordinary words for.
 */
export function secretForms(values: readonly string[]): Buffer[] {
  const forms = new Map<string, Buffer>();
  const add = (form: Buffer): void => {
    if (form.length > 0) forms.set(form.toString('hex'), form);
  };
  for (const value of values) {
    if (value.length < MIN_REDACTED_LENGTH) continue;
    for (const text of [
      value,
      JSON.stringify(value).slice(1, -1),
      encodeURIComponent(value),
      new URLSearchParams({ v: value }).toString().slice(2),
    ]) {
      add(Buffer.from(text, 'utf8'));
    }
    add(Buffer.from(value, 'latin1'));
  }
  return [...forms.values()].sort((a, b) => b.length - a.length);
}

/**
 * The first max bytes of data, with each occurrence of a secret that starts
 * within them replaced by [redacted] whole (data holds enough bytes past max
 * for it), so that no secret, nor its beginning, is kept.
 */
export function redactExcerpt(data: Buffer, max: number, secrets: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [];
  let position = 0;
  while (position < Math.min(data.length, max)) {
    let at = -1;
    let length = 0;
    for (const secret of secrets) {
      const found = data.indexOf(secret, position);
      if (found !== -1 && (at === -1 || found < at || (found === at && secret.length > length))) {
        at = found;
        length = secret.length;
      }
    }
    if (at === -1 || at >= max) {
      parts.push(data.subarray(position, max));
      break;
    }
    parts.push(data.subarray(position, at), REDACTED);
    position = at + length;
  }
  return Buffer.concat(parts);
}

/**
 * Scrubs request header values from a message. No message built here includes
 * headers, but undici's and Node's messages are not ours to promise about: the
 * API key must never reach an attempt record. Before the message is cut to
 * its length, so that a secret is never cut in two and half kept.
 */
export function redactMessage(message: string, secrets: readonly Buffer[]): string {
  return redactExcerpt(Buffer.from(message, 'utf8'), Number.MAX_SAFE_INTEGER, secrets).toString('utf8');
}
