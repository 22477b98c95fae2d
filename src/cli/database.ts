import type pg from 'pg';
import { assertReachable, createPool, requireDatabaseUrl } from '../db/connect.js';
import { assertSchemaCurrent } from '../migrate/migrate.js';

/**
 * Runs a command's work with a pool on --database-url (or DATABASE_URL),
 * checked reachable and, unless `schema: false` (migrate itself), migrated to
 * this code's version, so an unmigrated database is one line naming `migrate`
 * rather than an SQL error. The pool is ended after.
 */
export async function withDatabase<T>(
  option: string | undefined,
  work: (pool: pg.Pool, databaseUrl: string) => Promise<T>,
  { schema = true }: { schema?: boolean } = {},
): Promise<T> {
  const databaseUrl = requireDatabaseUrl(option);
  const pool = createPool(databaseUrl, { max: 4 });
  try {
    await assertReachable(pool, databaseUrl);
    if (schema) await assertSchemaCurrent(pool);
    return await work(pool, databaseUrl);
  } finally {
    await pool.end();
  }
}
