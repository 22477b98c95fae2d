import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../src/db/array-literal.js';
import { Params, unnestColumns, valuesColumns, type Column } from '../../src/db/columns.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A statement's bind parameters are built from a column list, so that the
// placeholders in its text and the values array cannot disagree: whatever
// order the columns come in, each name must read back the values of its own
// column. The server reading the rows back is the reference.

const db = useTestDatabase({ empty: true });

interface Row {
  readonly id: number;
  readonly label: string | null;
  readonly flag: boolean;
  readonly uuid: string;
}

const COLUMNS: ReadonlyArray<Column<readonly Row[]>> = [
  { name: 'id', type: 'bigint', value: (rows, i) => rows[i]!.id },
  { name: 'label', type: 'text', value: (rows, i) => rows[i]!.label },
  { name: 'flag', type: 'boolean', value: (rows, i) => rows[i]!.flag },
  { name: 'uuid', type: 'uuid', value: (rows, i) => rows[i]!.uuid },
];

const rowArb: fc.Arbitrary<Row> = fc.record({
  id: fc.integer(),
  label: fc.option(
    fc.string().map((value) => value.replaceAll('\u0000', '')),
    { nil: null },
  ),
  flag: fc.boolean(),
  uuid: fc.uuid(),
});

/** The rows in the form the server's to_jsonb gives them back. */
const expected = (rows: readonly Row[]): Row[] => rows.map((row) => ({ ...row }));

/** The columns in some order: reordering a list must change nothing the rows say. */
const orderArb = fc.shuffledSubarray([...COLUMNS], { minLength: COLUMNS.length });

describe('Params', () => {
  it('numbers placeholders in the order their values are added, casting when a type is given', () => {
    const params = new Params();
    expect(params.add('a')).toBe('$1');
    expect(params.add(2, 'int')).toBe('$2::int');
    expect(params.add(null, 'uuid[]')).toBe('$3::uuid[]');
    expect(params.values).toEqual(['a', 2, null]);
  });
});

describe('unnestColumns', () => {
  it('sends each column as the array its placeholder names, with its type, in the alias order', () => {
    const params = new Params();
    params.add('before');
    const rows: Row[] = [
      { id: 1, label: 'x', flag: true, uuid: '00000000-0000-7000-8000-000000000001' },
      { id: 2, label: null, flag: false, uuid: '00000000-0000-7000-8000-000000000002' },
    ];
    const unnest = unnestColumns(params, COLUMNS, rows, rows.length, 'r');
    expect(unnest.text).toBe('unnest($2::bigint[], $3::text[], $4::boolean[], $5::uuid[]) as r(id, label, flag, uuid)');
    expect([...unnest.arrays]).toEqual([
      ['id', '$2::bigint[]'],
      ['label', '$3::text[]'],
      ['flag', '$4::boolean[]'],
      ['uuid', '$5::uuid[]'],
    ]);
    expect(params.values).toEqual([
      'before',
      arrayLiteral([1, 2]),
      arrayLiteral(['x', null]),
      arrayLiteral([true, false]),
      arrayLiteral(rows.map((row) => row.uuid)),
    ]);
  });

  it('refuses a column list naming a column twice', () => {
    expect(() => unnestColumns(new Params(), [COLUMNS[0]!, COLUMNS[0]!], [], 0, 'r')).toThrow(/id comes twice/);
  });

  it('reads back every row by column name, whatever the columns order', async () => {
    await fc.assert(
      fc.asyncProperty(orderArb, fc.array(rowArb, { maxLength: 8 }), async (columns, rows) => {
        const params = new Params();
        // A parameter before the rows: the columns' numbers start after it.
        const offset = params.add(1, 'int');
        const unnest = unnestColumns(params, columns, rows, rows.length, 'r');
        const { rows: back } = await db.pool.query<{ row: Row }>(
          `select to_jsonb(r) - 'n' as row from (select r.*, ${offset} as n from ${unnest.text}) r`,
          params.values,
        );
        expect(back.map((row) => row.row)).toEqual(expected(rows));
      }),
      { numRuns: 40 },
    );
  });
});

describe('valuesColumns', () => {
  it('reads back every row by column name, whatever the columns order', async () => {
    await fc.assert(
      fc.asyncProperty(orderArb, fc.array(rowArb, { minLength: 1, maxLength: 8 }), async (columns, rows) => {
        const params = new Params();
        const offset = params.add(1, 'int');
        const values = valuesColumns(params, columns, rows, rows.length, 'v');
        const { rows: back } = await db.pool.query<{ row: Row }>(
          `select to_jsonb(v) - 'n' as row from (select v.*, ${offset} as n from ${values}) v`,
          params.values,
        );
        expect(back.map((row) => row.row)).toEqual(expected(rows));
      }),
      { numRuns: 40 },
    );
  });

  it('refuses no rows: VALUES holds at least one', () => {
    expect(() => valuesColumns(new Params(), COLUMNS, [], 0, 'v')).toThrow(/at least one row/);
  });
});
