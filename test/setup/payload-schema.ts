import { afterEach, expect } from 'vitest';
import { takePayloadSchemaViolations } from '../helpers/payload-schema.js';

// Every body a test receiver got during an end-to-end test (test/e2e/) must
// validate against schema/payload.schema.json: a body that does not fails that
// test. Elsewhere tests write payload rows of their own making, so what their
// receivers got is forgotten unchecked.
afterEach((context) => {
  const violations = takePayloadSchemaViolations();
  const file = context.task.file?.filepath ?? '';
  if (!file.includes('/test/e2e/')) return;
  expect(violations, 'bodies received that do not match schema/payload.schema.json').toEqual([]);
});
