import fc from 'fast-check';
import { expect, it } from 'vitest';
import { STRING_ARRAY_OIDS } from '../../src/db/connect.js';
import { useTestDatabase } from '../helpers/test-database.js';

// src/db/connect.ts reads arrays of strings with postgres-array 3 rather than
// pg's own parser. What the server sends must come back as the same values:
// the server's own JSON of each array is the reference.

const db = useTestDatabase({ empty: true });

/** Strings with what the array syntax must quote or escape: quotes, backslashes, commas, braces, spaces, NULL, non-ASCII. */
const tricky = fc
  .oneof(
    fc.string(),
    fc.constantFrom('', 'NULL', 'null', ' ', 'a,b', '{x}', '"', '\\', '\\"', 'two words', 'ä ✓ 😀', '\t\n'),
    fc.stringMatching(/^[ -~]{0,12}$/),
  )
  .map((value) => value.replaceAll('\u0000', ''));

it('reads text[], varchar[] and uuid[] as the server means them', async () => {
  expect(STRING_ARRAY_OIDS).toEqual([1009, 1015, 2951]);
  await fc.assert(
    fc.asyncProperty(fc.array(fc.option(tricky, { nil: null }), { maxLength: 8 }), async (values) => {
      const { rows } = await db.pool.query<{ text: unknown; varchar: unknown; json: string }>(
        'select $1::text[] as text, $1::varchar[] as varchar, to_json($1::text[])::text as json',
        [values],
      );
      const expected: unknown = JSON.parse(rows[0]!.json);
      expect(expected).toEqual(values);
      expect(rows[0]!.text).toEqual(expected);
      expect(rows[0]!.varchar).toEqual(expected);
    }),
    { numRuns: 300 },
  );

  const { rows } = await db.pool.query<{
    ids: unknown;
    nested: unknown;
    empty: unknown;
    bounds: unknown;
    none: unknown;
  }>(
    `select array['5b0a2cc2-3c6b-4d55-9c8e-2f3b7c1b9a01', null]::uuid[] as ids,
            array[['a', null], ['b c', '"']]::text[] as nested, '{}'::text[] as empty,
            '[0:1]={x,y}'::text[] as bounds, null::text[] as none`,
  );
  expect(rows[0]).toEqual({
    ids: ['5b0a2cc2-3c6b-4d55-9c8e-2f3b7c1b9a01', null],
    nested: [
      ['a', null],
      ['b c', '"'],
    ],
    empty: [],
    bounds: ['x', 'y'],
    none: null,
  });
});
