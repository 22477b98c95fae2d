import type pg from 'pg';

/**
 * Runs work in one transaction on a client of the pool (or on the given
 * client): commit when it resolves, rollback when it throws.
 */
export async function inTransaction<T>(
  source: pg.Pool | pg.PoolClient,
  work: (client: pg.PoolClient) => Promise<T>,
  isolation?: 'repeatable read',
): Promise<T> {
  const client = 'release' in source ? source : await source.connect();
  try {
    await client.query(isolation === undefined ? 'begin' : `begin isolation level ${isolation}`);
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    if (client !== source) client.release();
  }
}
