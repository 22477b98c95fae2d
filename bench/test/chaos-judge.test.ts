import { expect, it } from 'vitest';
import { compareCapture, judgeRun, type OutcomeRow } from '../src/chaos-judge.js';

// The chaos run's verdict (bench/src/chaos.ts) rests on these: what counts as
// lost, and what as a duplicate, from the ledger's outcomes and the receipts.

const row = (eventId: string, webhookId: string, outcome: string, extra: Partial<OutcomeRow> = {}): OutcomeRow => ({
  eventId,
  webhookId,
  outcome,
  excludedBy: outcome === 'excluded' ? 'eventTypes' : null,
  payloadId: outcome === 'delivered' || outcome === 'dead_lettered' ? 1 : null,
  collapsedInto: null,
  ...extra,
});

it('accepts a run where every delivered event was received once', () => {
  const j = judgeRun(
    [row('a', 'w', 'delivered'), row('b', 'w', 'excluded'), row('c', 'w', 'collapsed', { collapsedInto: 'a' })],
    [{ webhookId: 'w', eventIds: ['a'] }],
    new Map(),
  );
  expect(j).toMatchObject({ lost: 0, duplicates: 0, receivedUnexpected: 0, excludedUnnamed: 0, delivered: 1 });
});

it('counts as lost what is pending, dead-lettered, delivered but never received, or collapsed into nothing', () => {
  const j = judgeRun(
    [
      row('a', 'w', 'pending'),
      row('b', 'w', 'dead_lettered'),
      row('c', 'w', 'delivered'),
      row('d', 'w', 'collapsed', { collapsedInto: 'c' }),
      row('e', 'w', 'collapsed', { collapsedInto: 'f' }),
      row('f', 'w', 'excluded'),
    ],
    [],
    new Map(),
  );
  expect(j).toMatchObject({ pending: 1, deadLettered: 1, deliveredNotReceived: 1, collapsedIntoNothing: 1, lost: 4 });
});

it('names exclusions without a check and receipts the ledger does not expect', () => {
  const j = judgeRun(
    [row('a', 'w', 'excluded', { excludedBy: null }), row('b', 'w', 'excluded')],
    [
      { webhookId: 'w', eventIds: ['b'] },
      { webhookId: 'w', eventIds: ['z'] },
    ],
    new Map(),
  );
  expect(j).toMatchObject({ excludedUnnamed: 1, receivedUnexpected: 2, lost: 0 });
});

it('counts duplicates per webhook and tells a payload sent again from an event sent in another body', () => {
  const outcomes = [
    row('a', 'w', 'delivered', { payloadId: 7 }),
    row('b', 'w', 'delivered', { payloadId: 7 }),
    row('c', 'w', 'delivered', { payloadId: 8 }),
    row('a', 'v', 'delivered', { payloadId: 9 }),
  ];
  const j = judgeRun(
    outcomes,
    [
      { webhookId: 'w', eventIds: ['a', 'b'] },
      { webhookId: 'w', eventIds: ['b', 'a'] },
      { webhookId: 'w', eventIds: ['c'] },
      { webhookId: 'w', eventIds: ['c', 'x'] },
      { webhookId: 'v', eventIds: ['a'] },
    ],
    new Map([
      [7, ['a', 'b']],
      [8, ['c']],
    ]),
  );
  expect(j.duplicates).toBe(3);
  expect(j.duplicated.map((d) => [d.eventId, d.payloadId, d.samePayload])).toEqual([
    ['a', 7, true],
    ['b', 7, true],
    ['c', 8, false],
  ]);
});

it('compares the events captured with the changes committed, per asset and type', () => {
  expect(
    compareCapture(
      [
        { assetId: 1, eventType: 'CREATED' },
        { assetId: 1, eventType: 'EDITED' },
        { assetId: 1, eventType: 'EDITED' },
        { assetId: 2, eventType: 'DELETED' },
      ],
      [
        { assetId: 1, eventType: 'CREATED' },
        { assetId: 1, eventType: 'EDITED' },
        { assetId: 2, eventType: 'EDITED' },
      ],
    ),
  ).toEqual({ missing: 2, unexplained: 1 });
});
