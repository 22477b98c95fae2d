import { describe, expect, it } from 'vitest';
import { changedMirrors } from '../../src/mirror/auto-reconcile.js';
import { webhook } from '../helpers/assets.js';

const shop = 'filters: [{ filterKind: keywords, condition: ANY, value: [shop] }]';
const mirror = (fields: string) => webhook(`id: copy, mirror: true, ${fields}`);

describe('which reloads start a mirror webhook reconcile (CONTRACT section 7, Reconcile)', () => {
  it('a change of its resource types, its parent rule or its filters', () => {
    const before = [mirror(shop)];
    expect(changedMirrors(before, [mirror(`resourceTypes: [Resource, Project], ${shop}`)])).toEqual([
      { webhookId: 'copy', changed: ['resource types'] },
    ]);
    expect(
      changedMirrors(before, [
        mirror(
          'filters: [{ filterKind: keywords, condition: ANY, value: [shop] }, { filterKind: parentId, condition: ANY, value: ["null", "7"] }]',
        ),
      ]),
    ).toEqual([{ webhookId: 'copy', changed: ['parent rule'] }]);
    expect(
      changedMirrors(before, [mirror('filters: [{ filterKind: keywords, condition: ANY, value: [web] }]')]),
    ).toEqual([{ webhookId: 'copy', changed: ['filters'] }]);
    expect(
      changedMirrors(before, [
        mirror(
          'eventTypes: [Created, Edited, Deleted, Purged], filters: [{ filterKind: keywords, condition: ANY, value: [web] }]',
        ),
      ]),
    ).toEqual([{ webhookId: 'copy', changed: ['event types', 'filters'] }]);
  });

  it('no other change, and no webhook that is new, disabled, or not a mirror one after', () => {
    const before = [mirror(shop)];
    expect(changedMirrors(before, [mirror(`${shop}, concurrency: 4, batchSize: 10`)])).toEqual([]);
    const web = 'filters: [{ filterKind: keywords, condition: ANY, value: [web] }]';
    expect(changedMirrors(before, [{ ...mirror(web), enabled: false }])).toEqual([]);
    expect(changedMirrors([], [mirror(shop)])).toEqual([]);
    expect(changedMirrors([webhook(`id: copy, ${shop}`)], [webhook(`id: copy, ${web}`)])).toEqual([]);
  });

  it('a webhook that was plain and is now a mirror one, whatever else changed: its set is seeded, then reconciled', () => {
    const web = 'filters: [{ filterKind: keywords, condition: ANY, value: [web] }]';
    expect(changedMirrors([webhook(`id: copy, ${shop}`)], [mirror(shop)])).toEqual([
      { webhookId: 'copy', changed: ['mirror switched on'] },
    ]);
    expect(changedMirrors([webhook(`id: copy, ${shop}`)], [mirror(web)])).toEqual([
      { webhookId: 'copy', changed: ['mirror switched on'] },
    ]);
    expect(changedMirrors([webhook(`id: copy, ${shop}`)], [{ ...mirror(shop), enabled: false }])).toEqual([]);
  });
});
