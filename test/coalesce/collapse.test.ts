import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collapsedInto } from '../../src/coalesce/collapse.js';
import { EVENT_TYPES, type EventType } from '../../src/interfaces.js';

// The collapse rule of the spec (section 5): within one coalescing run all
// EDITED events of one asset become one, the latest edit; other event types are
// never merged. collapsedInto decides one row, given what the claim query
// reports: the eventId of the latest EDITED row of the same asset in the run.

interface Row {
  readonly eventType: EventType;
  readonly eventId: string;
  readonly assetId: string;
}

/** The claim query's latestEditId for every row of one run: the last EDITED of its asset, for any type. */
function claim(rows: readonly Row[]): Array<Row & { latestEditId: string | null }> {
  const latest = new Map<string, string>();
  for (const row of rows) if (row.eventType === 'EDITED') latest.set(row.assetId, row.eventId);
  return rows.map((row) => ({ ...row, latestEditId: latest.get(row.assetId) ?? null }));
}

describe('collapsedInto', () => {
  it('merges an EDITED into the later edit of its asset', () => {
    expect(collapsedInto({ eventType: 'EDITED', eventId: 'e1', latestEditId: 'e3' })).toBe('e3');
  });

  it('keeps the latest EDITED itself', () => {
    expect(collapsedInto({ eventType: 'EDITED', eventId: 'e3', latestEditId: 'e3' })).toBeNull();
  });

  it('keeps an EDITED the claim query found no latest edit for', () => {
    expect(collapsedInto({ eventType: 'EDITED', eventId: 'e1', latestEditId: null })).toBeNull();
  });

  it.each(EVENT_TYPES.filter((type) => type !== 'EDITED'))('never merges a %s, even with a later edit', (eventType) => {
    expect(collapsedInto({ eventType, eventId: 'e1', latestEditId: 'e3' })).toBeNull();
    expect(collapsedInto({ eventType, eventId: 'e1', latestEditId: null })).toBeNull();
  });

  it('leaves, in a run, one EDITED per asset (its latest) and every other event', () => {
    const rows: Row[] = [
      { eventType: 'CREATED', eventId: 'c1', assetId: '1' },
      { eventType: 'EDITED', eventId: 'a1', assetId: '1' },
      { eventType: 'EDITED', eventId: 'b1', assetId: '2' },
      { eventType: 'REVERSION', eventId: 'r1', assetId: '1' },
      { eventType: 'EDITED', eventId: 'a2', assetId: '1' },
      { eventType: 'DELETED', eventId: 'd1', assetId: '1' },
      { eventType: 'EDITED', eventId: 'a3', assetId: '1' },
      { eventType: 'PURGED', eventId: 'p2', assetId: '2' },
    ];
    const kept = claim(rows).filter((row) => collapsedInto(row) === null);
    expect(kept.map((row) => row.eventId)).toEqual(['c1', 'b1', 'r1', 'd1', 'a3', 'p2']);
    expect(claim(rows).map((row) => collapsedInto(row))).toEqual([null, 'a3', null, null, 'a3', null, null, null]);
  });

  it('for any run, keeps exactly the last EDITED of each asset and all other events, each merged edit into it', () => {
    const runArb = fc
      .array(fc.tuple(fc.constantFrom(...EVENT_TYPES), fc.constantFrom('1', '2', '3')), { maxLength: 60 })
      .map((pairs) => pairs.map(([eventType, assetId], i): Row => ({ eventType, eventId: `e${i}`, assetId })));
    fc.assert(
      fc.property(runArb, (rows) => {
        const claimed = claim(rows);
        for (const row of claimed) {
          const into = collapsedInto(row);
          if (row.eventType !== 'EDITED') expect(into).toBeNull();
          else expect(into).toBe(row.eventId === row.latestEditId ? null : row.latestEditId);
        }
        const keptEdits = claimed.filter((row) => row.eventType === 'EDITED' && collapsedInto(row) === null);
        const assetsEdited = new Set(rows.filter((row) => row.eventType === 'EDITED').map((row) => row.assetId));
        expect(keptEdits.map((row) => row.assetId).sort()).toEqual([...assetsEdited].sort());
        for (const kept of keptEdits) {
          const later = rows.slice(rows.indexOf(rows.find((row) => row.eventId === kept.eventId)!) + 1);
          expect(later.some((row) => row.eventType === 'EDITED' && row.assetId === kept.assetId)).toBe(false);
        }
        expect(claimed.filter((row) => row.eventType !== 'EDITED' && collapsedInto(row) !== null)).toEqual([]);
      }),
    );
  });
});
