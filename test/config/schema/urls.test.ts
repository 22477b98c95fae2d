import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/** src/config/schema/urls.ts: a webhook's url (and, through it, every url of the document). */
const { refuses, reads } = useSchemaTable();
const url = (config: Config) => config.assetUpdater.webhooks[0]!.url;
const at = 'assetUpdater.webhooks[0].url';
const REWRITTEN =
  'expected a url without spaces, control characters (CR, LF, tab) or backslashes, which URL parsing would drop or rewrite (percent-encode them: %20, %0D, %0A, %09, %5C)';
/** A url of exactly `length` characters. */
const ofLength = (length: number) => {
  const start = 'https://receiver.example/';
  return start + 'a'.repeat(length - start.length);
};

describe('url: http or https, at most 8192 characters, nothing URL parsing would rewrite', () => {
  reads([
    ['http', { webhook: { url: 'http://receiver.example/a' } }, url, 'http://receiver.example/a'],
    [
      'a scheme in capitals and an IPv6 host',
      { webhook: { url: 'HTTPS://[2001:db8::1]:8443/a' } },
      url,
      'HTTPS://[2001:db8::1]:8443/a',
    ],
    [
      'https with a port, path, query and percent-encoding',
      { webhook: { url: 'https://receiver.example:8443/a%20b?x=1' } },
      url,
      'https://receiver.example:8443/a%20b?x=1',
    ],
    ['8192 characters', { webhook: { url: ofLength(8192) } }, (c) => url(c).length, 8192],
  ]);
  refuses([
    [
      '8193 characters',
      { webhook: { url: ofLength(8193) } },
      `${at}: expected a url of at most 8192 characters, got a url of 8193 characters`,
    ],
    [
      'ftp',
      { webhook: { url: 'ftp://receiver.example/a' } },
      `${at}: expected an http or https URL, got "ftp://receiver.example/a"`,
    ],
    [
      'a file url',
      { webhook: { url: 'file:///etc/passwd' } },
      `${at}: expected an http or https URL, got "file:///etc/passwd"`,
    ],
    [
      'a host without scheme',
      { webhook: { url: 'receiver.example/a' } },
      `${at}: expected an http or https URL, got "receiver.example/a"`,
    ],
    ['a number', { webhook: { url: 8080 } }, `${at}: expected an http or https URL, got 8080`],
    // URL parsing would read both as https://receiver.example/a.
    [
      'one slash after the scheme',
      { webhook: { url: 'https:/receiver.example/a' } },
      `${at}: expected an http or https URL, got "https:/receiver.example/a"`,
    ],
    [
      'three slashes after the scheme',
      { webhook: { url: 'https:///receiver.example/a' } },
      `${at}: expected an http or https URL, got "https:///receiver.example/a"`,
    ],
    [
      'a user and password, the password masked',
      { webhook: { url: 'https://user:hunter2@receiver.example/a' } },
      `${at}: expected a url without user or password, which are never sent (set an Authorization header in the webhook's headers instead), got "https://user:***@receiver.example/a"`,
    ],
    [
      'a space',
      { webhook: { url: 'https://receiver.example/a b' } },
      `${at}: ${REWRITTEN}, got " " at position 27 of "https://receiver.example/a b"`,
    ],
    [
      'a backslash',
      { webhook: { url: 'https://receiver.example\\a' } },
      `${at}: ${REWRITTEN}, got "\\\\" at position 25 of "https://receiver.example\\\\a"`,
    ],
    [
      'a tab',
      { webhook: { url: 'https://receiver.example/\ta' } },
      `${at}: ${REWRITTEN}, got "\\t" at position 26 of "https://receiver.example/\\ta"`,
    ],
    [
      'a line feed',
      { webhook: { url: 'https://receiver.example/a\n' } },
      `${at}: ${REWRITTEN}, got "\\n" at position 27 of "https://receiver.example/a\\n"`,
    ],
  ]);
});
