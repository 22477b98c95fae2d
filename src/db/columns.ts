import { arrayLiteral } from './array-literal.js';

/** A value a column carries: written into an array literal as it is (see arrayLiteral). */
export type Scalar = string | number | boolean | null;

/**
 * One column of rows sent to PostgreSQL: its name (as the SQL that reads the
 * rows refers to it), its SQL type, and how to read its value from the rows.
 * `value` reads row `index` of `rows`, so that rows kept column by column
 * (parallel arrays) need no object per row.
 */
export interface Column<Rows> {
  readonly name: string;
  /** The SQL type of one value, without `[]`: the cast of its placeholder. */
  readonly type: string;
  readonly value: (rows: Rows, index: number) => Scalar;
}

/**
 * The bind parameters of one statement. A placeholder is only ever made by
 * adding its value, so the `$n` in the text and the position of the value in
 * `values` cannot disagree, whatever order the statement's parts are built in.
 */
export class Params {
  readonly values: unknown[] = [];

  /** The placeholder of `value`, cast to `type` when given: `$n` or `$n::type`. */
  add(value: unknown, type?: string): string {
    this.values.push(value);
    const placeholder = `$${this.values.length}`;
    return type === undefined ? placeholder : `${placeholder}::${type}`;
  }
}

/** An unnest of rows (see unnestColumns). */
export interface Unnest {
  /** `unnest($a::t1[], $b::t2[], ...) as alias(c1, c2, ...)`. */
  readonly text: string;
  /** The placeholder of each column's array, by column name: other parts of the statement may read an array too. */
  readonly arrays: ReadonlyMap<string, string>;
}

/**
 * `count` rows sent as one array parameter per column (arrayLiteral), each
 * cast to an array of its column's type, and read back as rows by unnest.
 * Rows cost no parameters, so a statement holds any number of them.
 */
export function unnestColumns<Rows>(
  params: Params,
  columns: ReadonlyArray<Column<Rows>>,
  rows: Rows,
  count: number,
  alias: string,
): Unnest {
  const arrays = new Map<string, string>();
  for (const column of columns) {
    if (arrays.has(column.name))
      throw new Error(`unnestColumns: expected distinct column names, but ${column.name} comes twice`);
    const values = new Array<Scalar>(count);
    for (let i = 0; i < count; i += 1) values[i] = column.value(rows, i);
    arrays.set(column.name, params.add(arrayLiteral(values), `${column.type}[]`));
  }
  return { text: `unnest(${[...arrays.values()].join(', ')}) as ${alias}(${names(columns)})`, arrays };
}

/**
 * `(values ($a::t1, $b::t2, ...), ...) as alias(c1, c2, ...)`: `count` rows
 * sent as one parameter per value. For values that an array literal would
 * have to escape at length, such as JSON, where a parameter of their own is
 * sent as it is. `count` must be at least one (VALUES holds a row or more).
 */
export function valuesColumns<Rows>(
  params: Params,
  columns: ReadonlyArray<Column<Rows>>,
  rows: Rows,
  count: number,
  alias: string,
): string {
  if (count < 1) throw new Error(`valuesColumns: expected at least one row, but found ${count}`);
  const tuples = new Array<string>(count);
  for (let i = 0; i < count; i += 1) {
    let tuple = '';
    for (const column of columns) {
      if (tuple !== '') tuple += ', ';
      tuple += params.add(column.value(rows, i), column.type);
    }
    tuples[i] = `(${tuple})`;
  }
  return `(values ${tuples.join(', ')}) as ${alias}(${names(columns)})`;
}

/** The column names, comma separated, in the columns' order. */
export function names(columns: ReadonlyArray<Column<never>>): string {
  return columns.map((column) => column.name).join(', ');
}

/** One statement, ready to run: built at once, so that later changes to what it was built from cannot change what it writes. */
export interface Statement {
  readonly text: string;
  readonly values: unknown[];
}
