import { expect, it } from 'vitest';
import { OWN_LEASE_SETTLE_MS, processGoneGrace } from '../../src/maintenance/maintenance.js';

// The service's maintenance takes another process for dead only after its own
// lease has been held a minute (after an outage every live process has taken
// its lease back by then); test/e2e/process-lease.test.ts covers what
// maintenance does with the grace this returns.
it('takes no process for dead until its own lease has been held a minute, then waits out the request timeout plus 30 s', () => {
  expect(OWN_LEASE_SETTLE_MS).toBe(60_000);
  expect(processGoneGrace(0, 30)).toBeNull();
  expect(processGoneGrace(59_999, 30)).toBeNull();
  expect(processGoneGrace(60_000, 30)).toBe(60);
  expect(processGoneGrace(3_600_000, 5)).toBe(35);
});
