import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { describeSchema } from './describe-schema.js';

// The schema that `migrate` creates, as a catalog description kept in
// test/schema/schema.txt, so that every change to it shows in review. The
// description is the same on every supported server version (see
// describeSchema), and the test runs on each of them in CI.
//
// After an intended change to sql/migrations, regenerate the snapshot with
//   UPDATE_SCHEMA_SNAPSHOT=1 npx vitest run test/schema
// and commit it with the change.
const snapshotPath = fileURLToPath(new URL('./schema.txt', import.meta.url));

const db = useTestDatabase({ empty: true });

it('migrates an empty database to exactly the schema of test/schema/schema.txt', async () => {
  await migrate(db.pool);
  const actual = await describeSchema(db.pool);
  if (process.env.UPDATE_SCHEMA_SNAPSHOT === '1') {
    writeFileSync(snapshotPath, actual);
    return;
  }
  const expected = readFileSync(snapshotPath, 'utf8');
  expect(
    actual,
    'the migrated schema differs from test/schema/schema.txt (UPDATE_SCHEMA_SNAPSHOT=1 npx vitest run test/schema regenerates it)',
  ).toBe(expected);
});
