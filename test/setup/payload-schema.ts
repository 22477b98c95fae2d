import { afterEach, expect } from 'vitest';
import { takePayloadSchemaViolations } from '../helpers/payload-schema.js';

// Every body a test receiver got during a test must validate against
// schema/payload.schema.json: a body that does not fails that test.
afterEach(() => {
  expect(takePayloadSchemaViolations(), 'bodies received that do not match schema/payload.schema.json').toEqual([]);
});
