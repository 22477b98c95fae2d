import fc from 'fast-check';
import { beforeAll, expect, it } from 'vitest';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';
import type { FilterGroup } from '../../src/config/schema.js';
import { reconcile } from '../../src/mirror/reconcile.js';
import { seedFromHistory } from '../../src/mirror/seed.js';
import { webhook } from '../helpers/assets.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import {
  applyOp,
  createFolders,
  expectedSet,
  FILTER_SETS,
  firstNonIncreasing,
  opArbitrary,
  ReceiverCopy,
  type Op,
} from './workload.js';

const db = useTestDatabase();

/** Events sent as UNMATCHED over all cases: the workload must make assets leave, or the property says little. */
let unmatchedSeen = 0;
/**
 * Changes made to assets in the Trash (excluded as in_trash) over the random
 * cases alone: the generator must make some, whatever the hand-picked
 * examples do. Counted as cases that made any, not against a floor of edits
 * that a draw can miss (a total of 8 over 40 random cases has been seen, under
 * a floor of 10).
 */
let trashedEditCases = 0;
/** check() runs the hand-picked examples first, then the random cases. */
let cases = 0;
/** Cases in which a plain webhook was switched to a mirror one. */
let switchedOn = 0;

/**
 * A coalescing run reads `chunkSize` outbox rows per chunk: small chunks exercise its pipeline (see MirrorMembers.absorb).
 * `switch` changes the webhook's filters; `mirrorOn` sets `mirror: true` on a webhook that started plain (CONTRACT 7,
 * "Mirror switched on": its set seeded from its delivery history, then reconciled), and is nothing on a mirror one.
 */
type Step =
  | Op
  | { readonly kind: 'coalesce'; readonly chunkSize: number }
  | { readonly kind: 'switch' }
  | { readonly kind: 'mirrorOn' };

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: opArbitrary, weight: 8 },
  {
    arbitrary: fc.record({ kind: fc.constant('coalesce' as const), chunkSize: fc.integer({ min: 1, max: 8 }) }),
    weight: 4,
  },
  { arbitrary: fc.constant({ kind: 'switch' as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'mirrorOn' as const }), weight: 1 },
);

const routed = (set: number, mirror = true): RoutedWebhook =>
  openWebhook('copy', {
    mirror,
    resourceTypes: ['Resource'],
    filters: FILTER_SETS[set] as unknown as FilterGroup[],
  });
const configured = (set: number) => webhook(`id: copy, mirror: true, filters: ${JSON.stringify(FILTER_SETS[set])}`);

beforeAll(async () => {
  await registerWebhooks(db.pool, [routed(0)]);
});

/**
 * Runs `steps` in process (coalescing runs and, after each switch of the
 * webhook's filters, the reconcile that `run` would start), then delivers
 * the webhook's payloads in the order `order` shuffles them into. A webhook
 * that `startsPlain` is a plain one until its first `mirrorOn` step (or until
 * the end), when it is seeded and reconciled as `run` does: the receiver's
 * copy, kept from the plain payloads too, must end as the mirror's set.
 */
async function check(steps: readonly Step[], order: readonly number[], startsPlain = false): Promise<void> {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
  await registerWebhooks(db.pool, [routed(0)]);
  await createFolders(db.pool);
  let set = 0;
  let mirror = !startsPlain;
  const switchOn = async (): Promise<void> => {
    mirror = true;
    switchedOn += 1;
    await seedFromHistory(db.pool, 'copy');
    await reconcile({ pool: db.pool, webhook: configured(set), maxPayloadBytes: 1 << 24 });
  };
  for (const step of steps) {
    if (step.kind === 'coalesce') await runCoalesce(db.pool, [routed(set, mirror)], { chunkSize: step.chunkSize });
    else if (step.kind === 'switch') {
      set = 1 - set;
      if (mirror) await reconcile({ pool: db.pool, webhook: configured(set), maxPayloadBytes: 1 << 24 });
    } else if (step.kind === 'mirrorOn') {
      if (!mirror) {
        // What a plain run routed before the switch is in payloads already: run's switch comes at a reload.
        await runCoalesce(db.pool, [routed(set, false)]);
        await switchOn();
      }
    } else await applyOp(db.pool, step);
  }
  if (!mirror) {
    await runCoalesce(db.pool, [routed(set, false)]);
    await switchOn();
  }
  await runCoalesce(db.pool, [routed(set)]);
  const {
    rows: [excluded],
  } = await db.pool.query<{ n: number }>(
    'select count(*)::int as n from asset_webhooks.events where in_trash and reconcile_id is null',
  );
  if (cases++ >= EXAMPLES.length && excluded!.n > 0) trashedEditCases += 1;

  const sent = await payloads(db.pool, 'copy');
  const inOrder = sent.flatMap(bodyEvents);
  unmatchedSeen += inOrder.filter((event) => event.eventType === 'UNMATCHED').length;
  expect(firstNonIncreasing(inOrder)).toBeNull();
  // Any arrival order: the payloads sorted by the random keys of `order`.
  const keyed = sent.map((payload, index) => ({ payload, key: order[index % Math.max(order.length, 1)] ?? 0, index }));
  keyed.sort((a, b) => a.key - b.key || a.index - b.index);
  const copy = new ReceiverCopy();
  for (const { payload } of keyed) for (const event of bodyEvents(payload)) copy.apply(event);
  expect(copy.active()).toEqual(await expectedSet(db.pool, set));
  // And the set holds what the copy holds, each at the time it was last sent: the two digests agree.
  const { rows } = await db.pool.query<{ id: number; at: string }>(
    `select asset_id::int as id, sent_at ->> 'copy' as at from asset_webhooks.mirror_members
     where 'copy' = any (webhooks) order by asset_id`,
  );
  expect(copy.held()).toEqual(rows.map((row) => [row.id, row.at]));
}

/** Kept counterexamples and hand-picked cases (see docs/mirror.md), run before the random ones. */
const EXAMPLES: [Step[], number[], boolean][] = [
  // Plain, then switched on: 20 was told while it passed and left the filters unseen, 22 was purged while
  // plain, 21 enters the filters after the switch. The switch must unmatch 20 and leave 22 gone; 21 comes
  // by its edit.
  [
    [
      { kind: 'create', asset: 20, domain: 1, keywords: ['shop'] },
      { kind: 'create', asset: 21, domain: 1, keywords: [] },
      { kind: 'create', asset: 22, domain: 1, keywords: ['shop'] },
      { kind: 'coalesce', chunkSize: 2 },
      { kind: 'keyword', asset: 20, keyword: 'shop', add: false },
      { kind: 'purge', asset: 22 },
      { kind: 'coalesce', chunkSize: 3 },
      { kind: 'mirrorOn' },
      { kind: 'keyword', asset: 21, keyword: 'shop', add: true },
    ],
    [2, 0, 1],
    true,
  ],
  // An asset of the set leaves it by a filter switch, then comes back by an edit.
  [
    [
      { kind: 'create', asset: 10, domain: 2, keywords: ['shop'] },
      { kind: 'coalesce', chunkSize: 2 },
      { kind: 'switch' },
      { kind: 'keyword', asset: 10, keyword: 'shop', add: false },
      { kind: 'domain', asset: 10, domain: 1 },
    ],
    [3, 2, 1],
    false,
  ],
  // Trashed, restored out of the filters, purged: UNMATCHED then PURGED.
  [
    [
      { kind: 'create', asset: 11, domain: 1, keywords: ['shop'] },
      { kind: 'coalesce', chunkSize: 2 },
      { kind: 'trash', asset: 11 },
      { kind: 'coalesce', chunkSize: 2 },
      { kind: 'restore', asset: 11 },
      { kind: 'keyword', asset: 11, keyword: 'shop', add: false },
      { kind: 'coalesce', chunkSize: 2 },
      { kind: 'purge', asset: 11 },
    ],
    [2, 1, 0],
    false,
  ],
  // Edited in the Trash out of the filters, then restored: UNMATCHED; edited back, restored again: EDITED.
  [
    [
      { kind: 'create', asset: 12, domain: 1, keywords: ['shop'] },
      { kind: 'coalesce', chunkSize: 3 },
      { kind: 'trash', asset: 12 },
      { kind: 'keyword', asset: 12, keyword: 'shop', add: false },
      { kind: 'version', asset: 12 },
      { kind: 'coalesce', chunkSize: 1 },
      { kind: 'restore', asset: 12 },
      { kind: 'coalesce', chunkSize: 2 },
      { kind: 'trash', asset: 12 },
      { kind: 'keyword', asset: 12, keyword: 'shop', add: true },
      { kind: 'restore', asset: 12 },
    ],
    [1, 0, 2],
    false,
  ],
];

/**
 * A plain webhook switched on (CONTRACT 7, "Mirror switched on") whose asset moved to the Trash while
 * its filters excluded it: the receiver was last told the asset active, and the seed takes that event.
 * The reconcile that follows sees a member in the Trash last sent as active and unmatches it, though
 * it passes the filters again. Found by the property below.
 */
it('a plain webhook switched on removes from the copy an asset trashed while excluded', async () => {
  await check(
    [
      { kind: 'create', asset: 10, domain: 1, keywords: ['shop', 'hidden'] },
      { kind: 'coalesce', chunkSize: 1 },
      { kind: 'switch' },
      { kind: 'trash', asset: 10 },
      { kind: 'coalesce', chunkSize: 1 },
      { kind: 'switch' },
      { kind: 'mirrorOn' },
    ],
    [],
    true,
  );
});

/**
 * The other way round: trashed while the plain webhook took it (the receiver holds it in the Trash),
 * restored while excluded. The seed takes the DELETED; the reconcile sees a member active and passing
 * last sent as DELETED, and sends it an EDITED.
 */
it('a plain webhook switched on brings back in the copy an asset restored while excluded', async () => {
  await check(
    [
      { kind: 'create', asset: 10, domain: 1, keywords: ['shop', 'hidden'] },
      { kind: 'coalesce', chunkSize: 1 },
      { kind: 'trash', asset: 10 },
      { kind: 'coalesce', chunkSize: 1 },
      { kind: 'switch' },
      { kind: 'restore', asset: 10 },
      { kind: 'coalesce', chunkSize: 1 },
      { kind: 'switch' },
      { kind: 'mirrorOn' },
    ],
    [],
    true,
  );
});

it(
  "a receiver applying events by the rule ends with exactly the assets that pass the mirror webhook's checks, whatever the payloads' order",
  { timeout: 240_000 },
  async () => {
    // The cases above ran check() too.
    cases = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArbitrary, { minLength: 20, maxLength: 80 }),
        fc.array(fc.integer(), { maxLength: 40 }),
        fc.boolean(),
        (steps, order, startsPlain) => check(steps, order, startsPlain),
      ),
      {
        numRuns: 40,
        examples: EXAMPLES,
      },
    );
    expect(unmatchedSeen).toBeGreaterThan(10);
    expect(trashedEditCases).toBeGreaterThan(0);
    expect(switchedOn).toBeGreaterThan(5);
  },
);
