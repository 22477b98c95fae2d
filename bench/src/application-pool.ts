import pg from 'pg';
import { KEEPALIVE } from '../../src/db/connect.js';

/**
 * A pool as the DAM's application opens one: the server's default
 * search_path, so the workload writes `assets` and the other asset tables by
 * their plain names. The service's own pools (createPool) pin search_path and
 * reach only what they name with its schema; the service's functions called
 * in-process on this pool name everything with its schema too.
 */
export function applicationPool(databaseUrl: string, options: { max: number; applicationName: string }): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max,
    application_name: options.applicationName,
    ...KEEPALIVE,
  });
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}
