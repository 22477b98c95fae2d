import type pg from 'pg';
import { assertReachable, createPool, requireDatabaseUrl } from '../db/connect.js';

/** Runs a command's work with a pool on --database-url (or DATABASE_URL), checked reachable, ended after. */
export async function withDatabase<T>(option: string | undefined, work: (pool: pg.Pool, databaseUrl: string) => Promise<T>): Promise<T> {
  const databaseUrl = requireDatabaseUrl(option);
  const pool = createPool(databaseUrl, { max: 4 });
  try {
    await assertReachable(pool, databaseUrl);
    return await work(pool, databaseUrl);
  } finally {
    await pool.end();
  }
}
