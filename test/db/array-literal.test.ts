import fc from 'fast-check';
import { expect, it } from 'vitest';
import { arrayLiteral, listLiteral } from '../../src/db/array-literal.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The coalescer sends each column of a chunk's events as one array literal,
// and an event's lists (its receivers, the keywords and fields routing saw)
// as array literals inside a text[] column, which PostgreSQL casts row by row.
// Each value must arrive as the value it was, whatever it holds; the server's
// own JSON of the cast is the reference.

const db = useTestDatabase({ empty: true });

/** Strings with what the array syntax must quote or escape: quotes, backslashes, commas, braces, spaces, NULL, non-ASCII. */
const tricky = fc
  .oneof(
    fc.string(),
    fc.constantFrom('', 'NULL', 'null', ' ', 'a,b', '{x}', '"', '\\', '\\"', 'two words', 'ä ✓ 😀', '\t\n', '{}'),
    fc.stringMatching(/^[ -~]{0,12}$/),
  )
  .map((value) => value.replaceAll('\u0000', ''));

it('writes columns and lists that PostgreSQL reads back as the same values', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.oneof(fc.array(tricky, { maxLength: 6 }), fc.constant(null)), { maxLength: 5 }),
      fc.array(fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 6 }), { maxLength: 5 }),
      fc.array(fc.option(tricky, { nil: null }), { maxLength: 6 }),
      fc.array(fc.option(fc.boolean(), { nil: null }), { maxLength: 6 }),
      fc.array(fc.option(fc.integer(), { nil: null }), { maxLength: 6 }),
      async (texts, numbers, strings, booleans, integers) => {
        const { rows } = await db.pool.query<{
          texts: string;
          numbers: string;
          strings: string;
          booleans: string;
          integers: string;
        }>(
          `select (select coalesce(json_agg(to_json(t::text[]) order by i), '[]') from unnest($1::text[]) with ordinality as u(t, i))::text as texts,
                  (select coalesce(json_agg(to_json(n::bigint[]) order by i), '[]') from unnest($2::text[]) with ordinality as u(n, i))::text as numbers,
                  to_json($3::text[])::text as strings, to_json($4::boolean[])::text as booleans, to_json($5::bigint[])::text as integers`,
          [
            arrayLiteral(texts.map(listLiteral)),
            arrayLiteral(numbers.map(listLiteral)),
            arrayLiteral(strings),
            arrayLiteral(booleans),
            arrayLiteral(integers),
          ],
        );
        expect(JSON.parse(rows[0]!.strings)).toEqual(strings);
        expect(JSON.parse(rows[0]!.booleans)).toEqual(booleans);
        expect(JSON.parse(rows[0]!.integers)).toEqual(integers);
        // An empty list is written as null, as the events table stores it.
        const asStored = (lists: ReadonlyArray<readonly unknown[] | null>): unknown[] =>
          lists.map((list) => (list === null || list.length === 0 ? null : list));
        expect(JSON.parse(rows[0]!.texts)).toEqual(asStored(texts));
        expect(JSON.parse(rows[0]!.numbers)).toEqual(asStored(numbers));
      },
    ),
    { numRuns: 300 },
  );
});
