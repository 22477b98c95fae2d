import { afterAll, afterEach, beforeAll, inject } from 'vitest';
import pg from 'pg';
import { createPool, KEEPALIVE } from '../../src/db/connect.js';
import { databaseUrlFor } from './database-url.js';

export interface TestDatabase {
  /** URL of this test file's own database. */
  readonly url: string;
  readonly name: string;
  /** A pool on it with the database's default search_path, ended after the file's tests. */
  readonly pool: pg.Pool;
}

let counter = 0;

/**
 * Gives the calling test file its own database, cloned from the migrated
 * template (or empty, for tests of `migrate` itself). It is dropped after the
 * file's tests only when they all passed, so a failure leaves its data to
 * inspect (the name is printed).
 */
export function useTestDatabase(options: { empty?: boolean } = {}): TestDatabase {
  const name = `aw_test_${process.pid}_${Date.now().toString(36)}_${counter++}`;
  const url = databaseUrlFor(inject('serverUrl'), name);
  let pool: pg.Pool | undefined;
  let failed = false;
  const handle = {
    url,
    name,
    get pool(): pg.Pool {
      if (!pool) throw new Error('the test database is created in beforeAll');
      return pool;
    },
  };

  beforeAll(async () => {
    const admin = createPool(inject('serverUrl'), { max: 1 });
    try {
      await admin.query(
        options.empty ? `create database ${name}` : `create database ${name} template ${inject('templateDatabase')}`,
      );
    } finally {
      await admin.end();
    }
    // The database's default search_path, not the service's (createPool pins
    // it): this pool writes the asset tables by their bare names, as the DAM's
    // application does, and stands for the DAM as much as for the service.
    pool = new pg.Pool({ connectionString: url, max: 10, ...KEEPALIVE });
    pool.on('error', () => {});
  });
  afterEach((context) => {
    if (context.task.result?.state === 'fail') failed = true;
  });
  afterAll(async () => {
    await pool?.end();
    if (failed) {
      process.stderr.write(`kept database ${name} of a failed test for inspection\n`);
      return;
    }
    const admin = createPool(inject('serverUrl'), { max: 1 });
    try {
      await admin.query(`drop database if exists ${name} with (force)`);
    } finally {
      await admin.end();
    }
  });
  return handle;
}
