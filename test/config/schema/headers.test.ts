import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/** src/config/schema/headers.ts: a webhook's `headers`. */
const { refuses, reads } = useSchemaTable();
const headers = (config: Config) => config.assetUpdater.webhooks[0]!.headers;
const at = 'assetUpdater.webhooks[0].headers';
const given = (value: unknown) => ({ webhook: { headers: value } });
const INVALID_VALUE =
  'expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF';

describe('headers: a mapping of HTTP token names to values, none by default', () => {
  reads([
    ['none by default', {}, headers, undefined],
    ['an empty mapping', given({}), headers, {}],
    [
      'values with spaces, tabs and punctuation',
      given({ 'X-Tenant': 'acme', 'X-Hint': 'a b;\tc' }),
      headers,
      { 'X-Tenant': 'acme', 'X-Hint': 'a b;\tc' },
    ],
    ['a value of U+00FF, the last allowed', given({ 'X-Latin': '\u00ff' }), headers, { 'X-Latin': '\u00ff' }],
    ['a User-Agent of its own', given({ 'User-Agent': 'mine/1' }), headers, { 'User-Agent': 'mine/1' }],
    // 8192 bytes, name and value together: the most one header may have.
    ['a header of 8192 bytes', given({ 'X-A': 'v'.repeat(8189) }), (c) => headers(c)!['X-A']!.length, 8189],
    [
      '16384 bytes of headers in all, an empty value among them',
      given({ 'X-A': 'v'.repeat(8189), 'X-B': 'v'.repeat(8186), 'X-C': '' }),
      (c) => Object.keys(headers(c)!),
      ['X-A', 'X-B', 'X-C'],
    ],
  ]);
  refuses([
    [
      'a string for the mapping',
      given('X-Tenant: acme'),
      `${at}: expected a mapping of header names to string values, got "X-Tenant: acme"`,
    ],
    [
      'a name with a space',
      given({ 'X Tenant': 'acme' }),
      `${at}["X Tenant"]: expected a header name made of HTTP token characters, got "X Tenant"`,
    ],
    [
      'a name with a colon',
      given({ 'X-Tenant:': 'acme' }),
      `${at}["X-Tenant:"]: expected a header name made of HTTP token characters, got "X-Tenant:"`,
    ],
    [
      'Host, in lower case',
      given({ host: 'x' }),
      `${at}.host: expected a header other than Content-Type, X-API-Key, Host or Content-Length (the service sets those), got "host"`,
    ],
    [
      'X-API-Key',
      given({ 'X-API-Key': 'x' }),
      `${at}["X-API-Key"]: expected a header other than Content-Type, X-API-Key, Host or Content-Length (the service sets those), got "X-API-Key"`,
    ],
    [
      'webhook-signature',
      given({ 'Webhook-Signature': 'v1,x' }),
      `${at}["Webhook-Signature"]: expected a header other than webhook-id, webhook-timestamp or webhook-signature (signing sets those: see signing.secret), got "Webhook-Signature"`,
    ],
    [
      'Transfer-Encoding',
      given({ 'Transfer-Encoding': 'chunked' }),
      `${at}["Transfer-Encoding"]: expected a header other than Connection, Keep-Alive, Transfer-Encoding, Upgrade or Expect (the HTTP client manages those), got "Transfer-Encoding"`,
    ],
    [
      'a name twice, in two cases',
      given({ 'X-Tenant': 'a', 'x-tenant': 'b' }),
      `${at}["x-tenant"]: expected each header once (header names ignore case: "X-Tenant" is the same header), got "x-tenant"`,
    ],
    ['a number for a value', given({ 'X-Tenant': 5 }), `${at}["X-Tenant"]: expected a string header value, got 5`],
    [
      'a line feed in a value, which is not shown',
      given({ 'X-Tenant': 'acme\nX-Injected: yes' }),
      `${at}["X-Tenant"]: ${INVALID_VALUE}, got a value with "\\n" at position 5 (the value is not shown: it may be secret)`,
    ],
    [
      'a character beyond U+00FF',
      given({ 'X-Tenant': 'a\u0100' }),
      `${at}["X-Tenant"]: ${INVALID_VALUE}, got a value with "\u0100" at position 2 (the value is not shown: it may be secret)`,
    ],
    [
      'a header of 8193 bytes',
      given({ 'X-A': 'v'.repeat(8190) }),
      `${at}["X-A"]: expected a header of at most 8192 bytes, name and value, got 8193 bytes (the value is not shown: it may be secret)`,
    ],
    [
      '16385 bytes of headers in all',
      given({ 'X-A': 'v'.repeat(8189), 'X-B': 'v'.repeat(8187), 'X-C': '' }),
      `${at}: expected at most 16384 bytes of headers in all, names and values, got 16385 bytes in 3 headers`,
    ],
  ]);
});
