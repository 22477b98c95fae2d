import { expect, it } from 'vitest';
import { OWN_LEASE_SETTLE_MS, processGoneGrace } from '../../src/delivery/recover.js';

// Crash recovery takes another process for dead only after this process has
// held its own lease for a while (after an outage every live process has
// taken its lease back by then); test/service/process-lease.test.ts covers what
// recovery does with the grace this returns.
it('takes no process for dead until its own lease has been held 15 s, then waits out the request timeout plus 5 s', () => {
  expect(OWN_LEASE_SETTLE_MS).toBe(15_000);
  expect(processGoneGrace(0, 30)).toBeNull();
  expect(processGoneGrace(14_999, 30)).toBeNull();
  expect(processGoneGrace(15_000, 30)).toBe(35);
  expect(processGoneGrace(3_600_000, 5)).toBe(10);
});
