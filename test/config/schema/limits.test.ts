import { describe, expect, it } from 'vitest';
import { MAX_DOCUMENT_BYTES, MAX_HEADER_BYTES, MAX_HEADERS_BYTES, MAX_URL_LENGTH } from '../../../src/config/schema.js';
import { documentWith, useLoader, useSchemaTable } from './documents.js';

/**
 * src/config/schema/limits.ts: the sizes no sensible document reaches, each
 * refused with a line naming it (the url and header limits are tabled with
 * their keys, in urls.test.ts and headers.test.ts; here, the document's).
 */
const { refuses } = useSchemaTable();
const loader = useLoader();

describe('the limits are the ones docs/configuration.md gives', () => {
  it('holds 8192 characters of a url, 8192 bytes of a header, 16384 of all headers and 4 MiB of a document', () => {
    expect([MAX_URL_LENGTH, MAX_HEADER_BYTES, MAX_HEADERS_BYTES, MAX_DOCUMENT_BYTES]).toEqual([
      8192, 8192, 16_384, 4_194_304,
    ]);
  });
});

describe('MAX_DOCUMENT_BYTES: a document of at most 4 MiB', () => {
  /** The document of one webhook padded with a YAML comment to exactly `bytes` bytes. */
  const padded = (bytes: number): string => {
    const text = documentWith({});
    return `${text}#${'x'.repeat(bytes - text.length - 2)}\n`;
  };

  it('accepts a document of exactly 4194304 bytes', async () => {
    const text = padded(MAX_DOCUMENT_BYTES);
    expect(Buffer.byteLength(text)).toBe(MAX_DOCUMENT_BYTES);
    expect(await loader.problems(text)).toEqual([]);
  });

  it('refuses one of 4194305 bytes, naming the limit and the size', async () => {
    const problems = await loader.problems(padded(MAX_DOCUMENT_BYTES + 1));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^\/.*\/config-\d+\.yaml: expected a configuration document of at most 4194304 bytes \(4 MiB\), got 4194305 bytes$/,
    );
  });
});

describe('the url and header limits, at their keys', () => {
  refuses([
    [
      'a url one character too long',
      { webhook: { url: `https://receiver.example/${'a'.repeat(MAX_URL_LENGTH - 24)}` } },
      `assetUpdater.webhooks[0].url: expected a url of at most ${MAX_URL_LENGTH} characters, got a url of ${MAX_URL_LENGTH + 1} characters`,
    ],
  ]);
});
