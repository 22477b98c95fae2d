import { expect, it } from 'vitest';
import { parseSections, SECTIONS, summaryOf, tableOf, type Figure } from '../src/report.js';
import { measured } from '../src/stats.js';

// The summary is what `--json` prints and scripts/bench-compare.sh reads: its
// keys and rounding must not depend on which sections ran.

const figures: Figure[] = [
  { key: 'delivery.ratio_to_durable_baseline', value: measured([0.41234, 0.45, 0.39]), digits: 3, goal: '>= 0.6' },
  { key: 'delivery.isolation_p99_over_interval_ms', value: 39.6, digits: 0, goal: '<= 1,000' },
  { key: 'coalesce.events_per_second', value: measured([23_752.4, 23_398, 23_779]), digits: 0, goal: 'report' },
  { key: 'ledger.balanced', value: true, digits: 0, goal: 'true' },
];

it('nests the keys by section and rounds the medians', () => {
  expect(summaryOf(figures)).toEqual({
    delivery: { ratio_to_durable_baseline: 0.412, isolation_p99_over_interval_ms: 40 },
    coalesce: { events_per_second: 23_752 },
    ledger: { balanced: true },
  });
});

it('prints every figure with its spread and goal', () => {
  const table = tableOf(figures);
  expect(table).toMatch(/delivery\.ratio_to_durable_baseline\s+0\.412 \[0\.39, 0\.45\]\s+>= 0\.6/);
  expect(table).toMatch(/delivery\.isolation_p99_over_interval_ms\s+40\s+<= 1,000/);
  expect(table).toMatch(/ledger\.balanced\s+true\s+true/);
});

it('reads --only as a set of known sections, and refuses unknown ones by listing the known', () => {
  expect(parseSections(undefined)).toEqual(new Set(SECTIONS));
  expect(parseSections('coalesce, delivery,slow-receivers')).toEqual(
    new Set(['coalesce', 'delivery', 'slow-receivers']),
  );
  expect(() => parseSections('delivery,deliveries')).toThrow(/write-cost, coalesce/);
  expect(() => parseSections(',')).toThrow(/--only/);
});
