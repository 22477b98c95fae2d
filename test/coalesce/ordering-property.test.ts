import fc from 'fast-check';
import type pg from 'pg';
import { expect, it } from 'vitest';
import { inTransaction } from '../../src/db/transaction.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import {
  applyOp,
  createFolders,
  FOLDERS,
  firstNonIncreasing,
  opsOn,
  type Op,
  type ReceivedEvent,
} from '../mirror/workload.js';

/**
 * The rule of docs/receiving.md for every webhook: apply an event only when
 * its eventTimestamp is greater than the one held for its asset. A plain
 * webhook that takes every asset (children included) must then leave its
 * receiver with the database's active, trashed and purged assets, whatever
 * order its payloads arrive in (concurrency 4) or in order (concurrency 1),
 * through changes of one transaction, transactions held open across
 * coalescing runs, and changes to assets in the Trash.
 */

const db = useTestDatabase();

const everything = openWebhook('all', {
  batchSize: 3,
  filters: [{ filterKind: 'parentId', condition: 'ANY', value: ['null', ...FOLDERS.map(String)] }],
});

type AssetState = 'active' | 'trashed' | 'purged';

/** A receiver applying events by the rule. */
class Receiver {
  private readonly assets = new Map<number, { latest: string; state: AssetState }>();

  apply(event: ReceivedEvent): void {
    const known = this.assets.get(event.assetId);
    if (known !== undefined && event.eventTimestamp <= known.latest) return;
    const state: AssetState =
      event.eventType === 'DELETED' ? 'trashed' : event.eventType === 'PURGED' ? 'purged' : 'active';
    this.assets.set(event.assetId, { latest: event.eventTimestamp, state });
  }

  states(): Record<number, AssetState> {
    return Object.fromEntries([...this.assets].map(([id, entry]) => [id, entry.state]));
  }
}

/** Several changes of one asset in one transaction (or one statement). */
type Combined = { readonly kind: 'combined'; readonly asset: number; readonly how: (typeof COMBINATIONS)[number] };
const COMBINATIONS = ['version and trash', 'restore and version', 'trash and restore', 'edit and trash'] as const;

/** A keyword added in a transaction held open until `commit` (one at a time). */
type Held = { readonly kind: 'hold'; readonly asset: number } | { readonly kind: 'commit' };

type Step = Op | Combined | Held | { readonly kind: 'coalesce'; readonly chunkSize: number };

const ASSETS = 4;
const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: opsOn(ASSETS), weight: 8 },
  {
    arbitrary: fc.record({
      kind: fc.constant('combined' as const),
      asset: fc.integer({ min: 10, max: 10 + ASSETS - 1 }),
      how: fc.constantFrom(...COMBINATIONS),
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('hold' as const), asset: fc.integer({ min: 10, max: 13 }) }), weight: 2 },
  { arbitrary: fc.constant({ kind: 'commit' as const }), weight: 2 },
  {
    arbitrary: fc.record({ kind: fc.constant('coalesce' as const), chunkSize: fc.integer({ min: 1, max: 6 }) }),
    weight: 4,
  },
);

async function applyCombined(pool: pg.Pool, step: Combined): Promise<void> {
  const {
    rows: [found],
  } = await pool.query<{ trashed: boolean }>(
    'select trashed_at is not null as trashed from assets where asset_id = $1',
    [step.asset],
  );
  if (found === undefined) return;
  const version = 'latest_atom_id = coalesce(latest_atom_id, 0) + 1';
  switch (step.how) {
    case 'version and trash':
      if (!found.trashed)
        await pool.query(`update assets set ${version}, trashed_at = now() where asset_id = $1`, [step.asset]);
      return;
    case 'restore and version':
      if (found.trashed)
        await pool.query(`update assets set ${version}, trashed_at = null where asset_id = $1`, [step.asset]);
      return;
    case 'trash and restore':
      if (!found.trashed)
        await inTransaction(pool, async (tx) => {
          await tx.query('update assets set trashed_at = now() where asset_id = $1', [step.asset]);
          await tx.query('update assets set trashed_at = null where asset_id = $1', [step.asset]);
        });
      return;
    case 'edit and trash':
      if (!found.trashed)
        await inTransaction(pool, async (tx) => {
          await tx.query("update assets set title = 'last' where asset_id = $1", [step.asset]);
          await tx.query('update assets set trashed_at = now() where asset_id = $1', [step.asset]);
        });
      return;
  }
}

/** The database's answer: every asset ever created, active, in the Trash, or purged. */
async function databaseStates(pool: pg.Pool, created: ReadonlySet<number>): Promise<Record<number, AssetState>> {
  const { rows } = await pool.query<{ id: string; trashed: boolean }>(
    'select asset_id::text as id, trashed_at is not null as trashed from assets',
  );
  const states: Record<number, AssetState> = {};
  for (const id of created) states[id] = 'purged';
  for (const row of rows) states[Number(row.id)] = row.trashed ? 'trashed' : 'active';
  return states;
}

let heldSteps = 0;
let raisedSeen = 0;

async function check(steps: readonly Step[], order: readonly number[]): Promise<void> {
  await resetData(db.pool);
  await registerWebhooks(db.pool, [everything]);
  await createFolders(db.pool);
  const created = new Set<number>(FOLDERS);
  let held: { client: pg.PoolClient; asset: number } | null = null;
  const commit = async (): Promise<void> => {
    if (held === null) return;
    await held.client.query('commit');
    held.client.release();
    held = null;
  };
  try {
    for (const step of steps) {
      if (step.kind === 'coalesce') await runCoalesce(db.pool, [everything], { chunkSize: step.chunkSize });
      else if (step.kind === 'commit') await commit();
      else if (step.kind === 'hold') {
        if (held !== null) continue;
        const client = await db.pool.connect();
        await client.query('begin');
        // A keyword of its own: it takes no lock that the other steps' changes of the asset wait for.
        const { rowCount } = await client.query(
          "insert into asset_keywords (asset_id, value) select asset_id, 'held-' || gen_random_uuid() from assets where asset_id = $1",
          [step.asset],
        );
        held = { client, asset: step.asset };
        heldSteps += rowCount ?? 0;
      } else if (step.kind === 'combined') await applyCombined(db.pool, step);
      // A purge waits for the held transaction's lock on the asset: leave that asset be.
      else if (step.kind === 'purge' && held?.asset === step.asset) continue;
      else {
        if (step.kind === 'create') created.add(step.asset);
        await applyOp(db.pool, step);
      }
    }
  } finally {
    await commit();
  }
  await runCoalesce(db.pool, [everything]);

  const sent = await payloads(db.pool, 'all');
  const inOrder = sent.flatMap(bodyEvents);
  expect(firstNonIncreasing(inOrder)).toBeNull();
  // Concurrency 1: in payload order. Concurrency 4 (or retries): in any order, here the one `order` gives.
  const inSequence = new Receiver();
  for (const event of inOrder) inSequence.apply(event);
  const keyed = sent.map((payload, index) => ({ payload, key: order[index % Math.max(order.length, 1)] ?? 0, index }));
  keyed.sort((a, b) => a.key - b.key || a.index - b.index);
  const shuffled = new Receiver();
  for (const { payload } of keyed) for (const event of bodyEvents(payload)) shuffled.apply(event);
  const expected = await databaseStates(db.pool, created);
  expect(inSequence.states()).toEqual(expected);
  expect(shuffled.states()).toEqual(expected);
  const {
    rows: [raised],
  } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from asset_webhooks.events e
     where e.collapsed_into is null and exists (select 1 from asset_webhooks.events f
       where f.asset_id = e.asset_id and f.event_id <> e.event_id and f.collapsed_into is null
         and date_trunc('milliseconds', f.occurred_at) + interval '1 millisecond' = e.occurred_at)`,
  );
  raisedSeen += raised!.n;
}

it(
  "a receiver applying every event whose eventTimestamp is greater than the one it holds ends with the database's active, trashed and purged assets, at concurrency 1 and 4",
  { timeout: 300_000 },
  async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArbitrary, { minLength: 20, maxLength: 70 }),
        fc.array(fc.integer(), { maxLength: 40 }),
        check,
      ),
      {
        numRuns: 40,
        examples: [
          // Edited in a transaction held open while another trashes the asset and a run sends that.
          [
            [
              { kind: 'create', asset: 10, domain: 1, keywords: [] },
              { kind: 'coalesce', chunkSize: 2 },
              { kind: 'hold', asset: 10 },
              { kind: 'trash', asset: 10 },
              { kind: 'coalesce', chunkSize: 2 },
              { kind: 'commit' },
            ],
            [2, 1, 0],
          ],
          // A new version and the move to the Trash in one statement; a restore with a new version.
          [
            [
              { kind: 'create', asset: 11, domain: 1, keywords: [] },
              { kind: 'combined', asset: 11, how: 'version and trash' },
              { kind: 'keyword', asset: 11, keyword: 'shop', add: true },
              { kind: 'coalesce', chunkSize: 1 },
              { kind: 'combined', asset: 11, how: 'restore and version' },
              { kind: 'combined', asset: 11, how: 'trash and restore' },
            ],
            [1, 0],
          ],
        ],
      },
    );
    // The workload did what the property is about.
    expect(heldSteps).toBeGreaterThan(10);
    expect(raisedSeen).toBeGreaterThan(0);
  },
);
