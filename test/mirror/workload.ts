import fc from 'fast-check';
import type pg from 'pg';
import { inTransaction } from '../../src/db/transaction.js';

/**
 * Random asset workloads for the mirror tests, and the two things they
 * compare: a receiver that applies events by the rule of docs/mirror.md, and
 * the set the webhook's checks give, computed in SQL through the binding's
 * view (independently of the service's evaluation).
 */

/** Assets 1..3 are folders (parents), never changed; a workload's assets are 10 and up. */
export const FOLDERS = [1, 2, 3];
const FIRST = 10;

/** The two filter sets a mirror webhook switches between (resource types [Resource], top-level assets only). */
export const FILTER_SETS = [
  [{ filterKind: 'keywords', condition: 'ANY', value: ['shop'] }],
  [
    { filterKind: 'domainId', condition: 'ANY', value: ['1'] },
    { filterKind: 'keywords', condition: 'NONE', value: ['hidden'] },
  ],
] as const;

/** The active assets (not in the Trash) that pass filter set `set`, as SQL over the binding's view. */
export async function expectedSet(pool: pg.Pool, set: number): Promise<number[]> {
  const filter = set === 0 ? `'shop' = any(s.keywords)` : `s.domain_id = 1 and not ('hidden' = any(s.keywords))`;
  const { rows } = await pool.query<{ id: string }>(
    `select s.asset_id::text as id from asset_webhooks.asset_state s
     where not s.in_trash and s.supertype = 'Resource' and s.parent_id is null and ${filter}
     order by s.asset_id`,
  );
  return rows.map((row) => Number(row.id));
}

export type Op =
  | { readonly kind: 'create'; readonly asset: number; readonly domain: number; readonly keywords: readonly string[] }
  | { readonly kind: 'keyword'; readonly asset: number; readonly keyword: string; readonly add: boolean }
  | { readonly kind: 'domain'; readonly asset: number; readonly domain: number }
  | { readonly kind: 'parent'; readonly asset: number; readonly parent: number | null }
  | { readonly kind: 'supertype'; readonly asset: number; readonly supertype: 'Resource' | 'Project' }
  | { readonly kind: 'state'; readonly asset: number; readonly state: 'approved' | 'draft' }
  | { readonly kind: 'version'; readonly asset: number }
  | { readonly kind: 'trash'; readonly asset: number }
  | { readonly kind: 'restore'; readonly asset: number }
  | { readonly kind: 'purge'; readonly asset: number };

const keyword = fc.constantFrom('shop', 'hidden', 'other');

/** Operations on `assets` assets (ids 10 and up): fewer assets, more operations on each. */
export const opsOn = (assets: number): fc.Arbitrary<Op> => {
  const asset = fc.integer({ min: FIRST, max: FIRST + assets - 1 });
  return fc.oneof(
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('create' as const),
        asset,
        domain: fc.integer({ min: 1, max: 2 }),
        keywords: fc.subarray(['shop', 'hidden', 'other']),
      }),
    },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('keyword' as const), asset, keyword, add: fc.boolean() }) },
    fc.record({ kind: fc.constant('domain' as const), asset, domain: fc.integer({ min: 1, max: 2 }) }),
    fc.record({ kind: fc.constant('parent' as const), asset, parent: fc.constantFrom(null, ...FOLDERS) }),
    fc.record({
      kind: fc.constant('supertype' as const),
      asset,
      supertype: fc.constantFrom('Resource' as const, 'Project' as const),
    }),
    fc.record({
      kind: fc.constant('state' as const),
      asset,
      state: fc.constantFrom('approved' as const, 'draft' as const),
    }),
    fc.record({ kind: fc.constant('version' as const), asset }),
    fc.record({ kind: fc.constant('trash' as const), asset }),
    fc.record({ kind: fc.constant('restore' as const), asset }),
    fc.record({ kind: fc.constant('purge' as const), asset }),
  );
};

export const opArbitrary: fc.Arbitrary<Op> = opsOn(5);

/** Creates the folders (top-level, outside every filter set). */
export async function createFolders(pool: pg.Pool): Promise<void> {
  await pool.query(
    `insert into assets (asset_id, supertype, domain_id) select g, 'Project', 3 from unnest($1::bigint[]) g`,
    [FOLDERS],
  );
}

/**
 * Applies one operation as a DAM would, in its own transaction. An
 * operation that does not apply to the asset as it is (an edit of an asset
 * that does not exist, a restore of one not in the Trash) does nothing. An
 * asset in the Trash is edited like any other: the service must not send
 * those changes as EDITED or REVERSION (a receiver reads an EDITED as the
 * asset being back).
 */
export async function applyOp(pool: pg.Pool, op: Op): Promise<void> {
  const {
    rows: [found],
  } = await pool.query<{ trashed: boolean }>(
    'select trashed_at is not null as trashed from assets where asset_id = $1',
    [op.asset],
  );
  if (op.kind === 'create') {
    if (found !== undefined) return;
    await inTransaction(pool, async (tx) => {
      await tx.query('insert into assets (asset_id, domain_id, state) values ($1, $2, $3)', [
        op.asset,
        op.domain,
        'draft',
      ]);
      for (const value of op.keywords)
        await tx.query('insert into asset_keywords (asset_id, value) values ($1, $2)', [op.asset, value]);
    });
    return;
  }
  if (found === undefined) return;
  switch (op.kind) {
    case 'keyword':
      await pool.query(
        op.add
          ? 'insert into asset_keywords (asset_id, value) values ($1, $2) on conflict do nothing'
          : 'delete from asset_keywords where asset_id = $1 and value = $2',
        [op.asset, op.keyword],
      );
      return;
    case 'domain':
      await pool.query('update assets set domain_id = $2 where asset_id = $1', [op.asset, op.domain]);
      return;
    case 'parent':
      await pool.query('update assets set parent_id = $2 where asset_id = $1', [op.asset, op.parent]);
      return;
    case 'supertype':
      await pool.query('update assets set supertype = $2 where asset_id = $1', [op.asset, op.supertype]);
      return;
    case 'state':
      await pool.query('update assets set state = $2 where asset_id = $1', [op.asset, op.state]);
      return;
    case 'version':
      await pool.query('update assets set latest_atom_id = coalesce(latest_atom_id, 0) + 1 where asset_id = $1', [
        op.asset,
      ]);
      return;
    case 'trash':
      if (!found.trashed) await pool.query('update assets set trashed_at = now() where asset_id = $1', [op.asset]);
      return;
    case 'restore':
      if (found.trashed) await pool.query('update assets set trashed_at = null where asset_id = $1', [op.asset]);
      return;
    case 'purge':
      await pool.query('delete from assets where asset_id = $1', [op.asset]);
      return;
  }
}

export interface ReceivedEvent {
  readonly eventId: string;
  readonly eventTimestamp: string;
  readonly assetId: number;
  readonly eventType: string;
}

/**
 * A receiver's copy, kept by the rule of docs/mirror.md: per asset the
 * latest eventTimestamp applied, removals included; an event not newer is
 * ignored. CREATED, EDITED and REVERSION make the asset active, DELETED puts
 * it in the Trash, PURGED and UNMATCHED remove it.
 */
export class ReceiverCopy {
  private readonly assets = new Map<number, { latest: string; state: 'active' | 'trashed' | 'removed' }>();

  apply(event: ReceivedEvent): void {
    const known = this.assets.get(event.assetId);
    if (known !== undefined && event.eventTimestamp <= known.latest) return;
    const state =
      event.eventType === 'DELETED'
        ? 'trashed'
        : event.eventType === 'PURGED' || event.eventType === 'UNMATCHED'
          ? 'removed'
          : 'active';
    this.assets.set(event.assetId, { latest: event.eventTimestamp, state });
  }

  /** Every asset not removed (in the Trash too) with the latest eventTimestamp applied: what a receiver's digest hashes. */
  held(): Array<[number, string]> {
    return [...this.assets]
      .filter(([, entry]) => entry.state !== 'removed')
      .map(([id, entry]): [number, string] => [id, entry.latest])
      .sort((a, b) => a[0] - b[0]);
  }

  active(): number[] {
    return [...this.assets]
      .filter(([, entry]) => entry.state === 'active')
      .map(([id]) => id)
      .sort((a, b) => a - b);
  }
}

/**
 * Checks what the receiver relies on: within the webhook, one asset's
 * eventTimestamps in payload order strictly increase. Returns the first
 * offending pair, or null.
 */
export function firstNonIncreasing(events: readonly ReceivedEvent[]): [ReceivedEvent, ReceivedEvent] | null {
  const last = new Map<number, ReceivedEvent>();
  for (const event of events) {
    const before = last.get(event.assetId);
    if (before !== undefined && event.eventTimestamp <= before.eventTimestamp) return [before, event];
    last.set(event.assetId, event);
  }
  return null;
}
