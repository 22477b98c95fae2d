import { expect, it } from 'vitest';
import { useTestDatabase } from '../helpers/test-database.js';

// A function that does not pin its search_path resolves names through the
// caller's, in which another role of the shared asset database may have
// planted a function that then runs as the service's role (see
// test/service/shared-database.test.ts, and sql/functions/README.md).

const db = useTestDatabase();

it('pins search_path to pg_catalog then pg_temp in every function of schema asset_webhooks', async () => {
  const { rows } = await db.pool.query<{ signature: string; config: string[] | null }>(
    `select p.oid::regprocedure::text as signature, p.proconfig as config
     from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'asset_webhooks' order by 1`,
  );
  // The reference binding's trigger functions are among them.
  expect(rows.length).toBeGreaterThan(15);
  const unpinned = rows
    .filter((row) => !(row.config ?? []).includes('search_path=pg_catalog, pg_temp'))
    .map((row) => `${row.signature}: ${JSON.stringify(row.config)}`);
  expect(unpinned).toEqual([]);
});
