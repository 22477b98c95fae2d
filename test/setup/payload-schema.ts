import { afterEach, expect } from 'vitest';
import { takePayloadSchemaViolations } from '../helpers/payload-schema.js';

/**
 * The folders under test/ whose tests get bodies from the service itself:
 * every body a test receiver got there must validate against
 * schema/payload.schema.json, and a body that does not fails that test.
 * Elsewhere tests write payload rows of their own making, so what their
 * receivers got is forgotten unchecked. A folder of tests that run the real
 * service (end to end, `run`, `migrate`, the commands) belongs in this list.
 */
export const SCHEMA_CHECKED_FOLDERS = ['e2e', 'service', 'migrate', 'cli', 'demo'] as const;

const checked = SCHEMA_CHECKED_FOLDERS.map((folder) => `/test/${folder}/`);

afterEach((context) => {
  const violations = takePayloadSchemaViolations();
  const file = (context.task.file?.filepath ?? '').replaceAll('\\', '/');
  if (!checked.some((folder) => file.includes(folder))) return;
  expect(violations, 'bodies received that do not match schema/payload.schema.json').toEqual([]);
});
