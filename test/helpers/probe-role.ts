import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import type { TestDatabase } from './test-database.js';

export interface ProbeRole {
  /** The role's name. */
  readonly name: string;
  /** A pool that connects as the role. */
  readonly pool: pg.Pool;
}

/**
 * A login role of the asset database with no rights on schema asset_webhooks,
 * as the DAM's application role is, and CREATE on schema public, which every
 * role has by default before PostgreSQL 15. Created before the file's tests
 * and dropped, with what it owns, after them.
 */
export function useProbeRole(db: TestDatabase): ProbeRole {
  const name = `${db.name}_probe`;
  let pool: pg.Pool | undefined;
  beforeAll(async () => {
    // A password of its own: the embedded server asks for one (password
    // authentication), a server with trust authentication ignores it.
    const password = randomBytes(16).toString('hex');
    await db.pool.query(`create role ${name} login password '${password}'`);
    await db.pool.query(`grant create on schema public to ${name}`);
    const url = new URL(db.url);
    url.username = name;
    url.password = password;
    pool = new pg.Pool({ connectionString: url.toString(), max: 4, application_name: 'probe' });
    pool.on('error', () => {});
  });
  afterAll(async () => {
    await pool?.end();
    // The test database may be gone already (dropped after passing tests).
    const client = new pg.Client({ connectionString: db.url });
    try {
      await client.connect();
      await client.query(`drop owned by ${name} cascade`);
    } catch {
      // Nothing of the role is left where its database is gone.
    } finally {
      await client.end().catch(() => {});
    }
    const admin = new pg.Client({ connectionString: db.url.replace(/\/[^/?]*(\?|$)/, '/postgres$1') });
    await admin.connect();
    try {
      await admin.query(`drop role if exists ${name}`);
    } finally {
      await admin.end();
    }
  });
  return {
    name,
    get pool(): pg.Pool {
      if (!pool) throw new Error('the probe role is created in beforeAll');
      return pool;
    },
  };
}
