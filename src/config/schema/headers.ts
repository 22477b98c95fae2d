import { z } from 'zod';
import { SIGNATURE_HEADERS } from '../../delivery/http/signing.js';
import { quotedPrefix } from '../../text/printable.js';
import { MAX_HEADER_BYTES, MAX_HEADERS_BYTES } from './limits.js';
import { Found } from './primitives.js';

/** RFC 9110 token characters. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** RFC 9110 field-value characters: visible ASCII, space, tab and obs-text (0x80-0xFF); no CR, LF, NUL or other controls. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Headers the service sets itself; configuration may not override them. */
const SERVICE_HEADERS = ['content-type', 'x-api-key', 'host', 'content-length'];
/**
 * The Standard Webhooks headers, set by signing. Refused even on a webhook
 * without signing: a receiver that verifies them would reject such requests,
 * and a webhook that turns signing on later would send them twice.
 */
const SIGNATURE_HEADER_NAMES: readonly string[] = SIGNATURE_HEADERS;
/** Headers of the connection and the message framing, which the HTTP client manages (undici refuses them). */
const CONNECTION_HEADERS = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect'];

/**
 * A webhook's `headers`. Values are checked here rather than by the record's
 * value type, so that every problem of the mapping is reported at once, not
 * only the wrong types.
 */
export const headers = z
  .record(z.string(), z.unknown(), {
    error: 'expected a mapping of header names to string values',
  })
  .superRefine((value, context) => {
    const seen = new Map<string, string>();
    let total = 0;
    for (const [name, headerValue] of Object.entries(value)) {
      const lower = name.toLowerCase();
      if (!HEADER_NAME.test(name)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message: 'expected a header name made of HTTP token characters',
        });
      } else if (SERVICE_HEADERS.includes(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message:
            'expected a header other than Content-Type, X-API-Key, Host or Content-Length (the service sets those)',
        });
      } else if (SIGNATURE_HEADER_NAMES.includes(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message:
            'expected a header other than webhook-id, webhook-timestamp or webhook-signature (signing sets those: see signing.secret)',
        });
      } else if (CONNECTION_HEADERS.includes(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message:
            'expected a header other than Connection, Keep-Alive, Transfer-Encoding, Upgrade or Expect (the HTTP client manages those)',
        });
      } else if (seen.has(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message: `expected each header once (header names ignore case: ${quotedPrefix(seen.get(lower)!)} is the same header)`,
        });
      }
      if (!seen.has(lower)) seen.set(lower, name);
      total += name.length + (typeof headerValue === 'string' ? headerValue.length : 0);
      if (typeof headerValue !== 'string') {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: headerValue,
          message: 'expected a string header value',
        });
      } else if (name.length + headerValue.length > MAX_HEADER_BYTES) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: new Found(`${name.length + headerValue.length} bytes (the value is not shown: it may be secret)`),
          message: `expected a header of at most ${MAX_HEADER_BYTES} bytes, name and value`,
        });
      } else if (!HEADER_VALUE.test(headerValue)) {
        const index = [...headerValue].findIndex((character) => !HEADER_VALUE.test(character));
        context.addIssue({
          code: 'custom',
          path: [name],
          input: new Found(
            `a value with ${quotedPrefix([...headerValue][index]!)} at position ${index + 1} (the value is not shown: it may be secret)`,
          ),
          message:
            'expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF',
        });
      }
    }
    if (total > MAX_HEADERS_BYTES) {
      context.addIssue({
        code: 'custom',
        input: new Found(`${total} bytes in ${seen.size} headers`),
        message: `expected at most ${MAX_HEADERS_BYTES} bytes of headers in all, names and values`,
      });
    }
  })
  .transform((value) => value as Record<string, string>);
