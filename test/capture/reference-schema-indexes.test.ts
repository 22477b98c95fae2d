import { expect, it } from 'vitest';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

// A foreign key without an index led by its columns makes every delete of a
// referenced asset scan the referencing table (the cascade, or the check for
// children), so a bulk delete takes time quadratic in its size. The reference
// schema is the model bindings copy: each of its foreign keys must be indexed.
it('indexes every foreign key of the reference schema by an index whose leading columns are the key', async () => {
  const { rows } = await db.pool.query<{ foreign_key: string; indexed: boolean }>(`
    select format('%s (%s)', c.conrelid::regclass,
                  (select string_agg(a.attname, ', ' order by k.n) from unnest(c.conkey) with ordinality as k(attnum, n)
                   join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.attnum)) as foreign_key,
           exists (select 1 from pg_index i
                   where i.indrelid = c.conrelid and i.indpred is null
                     and (i.indkey::int2[])[0:cardinality(c.conkey) - 1] = c.conkey) as indexed
    from pg_constraint c
    where c.contype = 'f'
      and c.conrelid in ('public.assets'::regclass, 'public.asset_atoms'::regclass,
                         'public.asset_keywords'::regclass, 'public.asset_additional_fields'::regclass)
    order by 1`);
  expect(rows).toEqual([
    { foreign_key: 'asset_additional_fields (asset_id)', indexed: true },
    { foreign_key: 'asset_atoms (asset_id)', indexed: true },
    { foreign_key: 'asset_keywords (asset_id)', indexed: true },
    { foreign_key: 'assets (parent_id)', indexed: true },
  ]);
});
