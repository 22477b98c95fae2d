import { z } from 'zod';
import { quotedPrefix } from '../../text/printable.js';

/**
 * The building blocks every part of the schema shares: integer ranges,
 * strings PostgreSQL can store, and what a problem line says was found.
 */

export const intRange = (min: number, max: number) =>
  z
    .number({ error: `expected an integer from ${min} to ${max}` })
    .int({ error: `expected an integer from ${min} to ${max}` })
    .min(min, { error: `expected an integer from ${min} to ${max}` })
    .max(max, { error: `expected an integer from ${min} to ${max}` });

/**
 * What a problem line says was found, when the value itself must not be
 * printed (it may be a secret) or is too long to be useful.
 */
export class Found {
  constructor(readonly description: string) {}
}

/**
 * A NUL character, or half of a UTF-16 surrogate pair without its other half.
 * Every string of the document reaches PostgreSQL (as text, or in jsonb, where
 * JSON escapes them as \u0000 and \ud800): text cannot hold NUL, and jsonb
 * refuses both, so a document holding one would fail every coalescing run.
 */
export const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Refuses a string holding a character PostgreSQL cannot store (see UNSTORABLE). */
export function refuseUnstorable(value: string, context: z.core.$RefinementCtx<string>): void {
  const found = UNSTORABLE.exec(value);
  if (!found) return;
  context.addIssue({
    code: 'custom',
    input: new Found(
      `${found[0] === '\u0000' ? 'a NUL character' : 'an unpaired surrogate'} at position ${found.index + 1} of ${quotedPrefix(value)}`,
    ),
    message: 'expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store',
  });
}

/** A string of the document that PostgreSQL can store: every free-text value of the schema is one. */
export const storableString = (error: string) => z.string({ error }).superRefine(refuseUnstorable);

export const nonEmptyString = storableString('expected a non-empty string').min(1, {
  error: 'expected a non-empty string',
});
