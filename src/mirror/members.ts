import type pg from 'pg';
import { arrayLiteral } from '../db/array-literal.js';
import { Params, unnestColumns, type Column } from '../db/columns.js';
import type { DecimalId } from '../interfaces.js';

/** What the mirror webhooks know of one asset: whose set holds it, and the eventTimestamp last sent for it. */
export interface AssetMembership {
  /** The mirror webhooks whose set holds the asset. */
  readonly webhooks: ReadonlySet<string>;
  /** Epoch milliseconds of the last event sent for the asset to any mirror webhook; -Infinity when none was. */
  readonly lastMs: number;
}

/** One asset's new row of asset_webhooks.mirror_members. */
export interface MemberChange {
  readonly assetId: DecimalId;
  readonly assetUuid: string | null;
  readonly webhooks: readonly string[];
  readonly lastMs: number;
  /** Per webhook of `webhooks`: the eventTimestamp of the last event it was sent of the asset, as sent. */
  readonly sentAt: ReadonlyMap<string, string>;
}

interface Entry {
  readonly webhooks: Set<string>;
  lastMs: number;
  assetUuid: string | null;
  readonly sentAt: Map<string, string>;
}

/** An asset's row of asset_webhooks.mirror_members as a read returns it (MEMBERSHIP_COLUMNS); nulls when it has none. */
export interface MembershipRow {
  readonly mirror_webhooks: string[] | null;
  readonly mirror_last_ms: string | null;
  readonly mirror_asset_uuid: string | null;
  readonly mirror_sent_at: Readonly<Record<string, string>> | null;
}

/** The columns of MembershipRow, read from asset_webhooks.mirror_members as `m`. */
export const MEMBERSHIP_COLUMNS = `m.webhooks as mirror_webhooks,
  (extract(epoch from m.last_event_at) * 1000)::bigint::text as mirror_last_ms, m.asset_uuid as mirror_asset_uuid,
  m.sent_at as mirror_sent_at`;

const NEVER_TOLD: AssetMembership = { webhooks: new Set(), lastMs: -Infinity };

/**
 * The membership of the assets of one chunk. Only the holder of the
 * coalescing lock writes asset_webhooks.mirror_members (a coalescing run, or
 * a reconcile chunk), so what a chunk reads there is exact but for the
 * changes this holder has not committed yet: those of the two chunks before
 * (see absorb). They must be taken (takeChanges) once per chunk, in order,
 * and a chunk's write must commit before the chunk three after it is read.
 *
 * One row per asset, whatever the number of mirror webhooks: a chunk writes
 * at most one row per asset it sends anything for.
 */
export class MirrorMembers {
  private readonly known = new Map<DecimalId, Entry>();
  /** The changes of the last two chunks taken, oldest first: see absorb. */
  private previous: MemberChange[][] = [];
  private readonly current = new Map<DecimalId, Entry>();

  /** Reads the membership of `assetIds` (decimal), for a reconcile chunk. */
  async load(client: pg.Pool | pg.PoolClient, assetIds: readonly DecimalId[]): Promise<void> {
    if (assetIds.length === 0) return this.absorb([]);
    const { rows } = await client.query<MembershipRow & { asset_id: string }>(
      `select m.asset_id::text as asset_id, ${MEMBERSHIP_COLUMNS}
       from asset_webhooks.mirror_members m
       where m.asset_id = any($1::bigint[])`,
      [[...new Set(assetIds)]],
    );
    this.absorb(rows.map((row) => ({ assetId: row.asset_id, row })));
  }

  /**
   * Takes the membership of a chunk's assets as read with the chunk (rows
   * without one: never told), and lays over it the changes of the two chunks
   * before, which the read may not have seen: a coalescing run reads chunk
   * N+1 before it routes chunk N, while chunk N-1 may still be being written.
   */
  absorb(rows: ReadonlyArray<{ readonly assetId: DecimalId; readonly row: MembershipRow | null }>): void {
    this.known.clear();
    for (const { assetId, row } of rows) {
      if (row === null || row.mirror_webhooks === null) continue;
      const webhooks = new Set(row.mirror_webhooks);
      // A webhook removed from `webhooks` by hand (docs/mirror.md) may still have a time there: it left the set.
      const sentAt = Object.entries(row.mirror_sent_at ?? {}).filter(([webhookId]) => webhooks.has(webhookId));
      this.known.set(assetId, {
        webhooks,
        lastMs: Number(row.mirror_last_ms),
        assetUuid: row.mirror_asset_uuid,
        sentAt: new Map(sentAt),
      });
    }
    for (const changes of this.previous)
      for (const change of changes)
        this.known.set(change.assetId, {
          webhooks: new Set(change.webhooks),
          lastMs: change.lastMs,
          assetUuid: change.assetUuid,
          sentAt: new Map(change.sentAt),
        });
  }

  get(assetId: DecimalId): AssetMembership {
    return this.known.get(assetId) ?? NEVER_TOLD;
  }

  /** Whether the set of `webhookId` holds the asset. */
  isMember(webhookId: string, assetId: DecimalId): boolean {
    return this.known.get(assetId)?.webhooks.has(webhookId) === true;
  }

  /** The eventTimestamp for the next event of the asset: its own time, or just after the last one sent if that is not later. */
  nextMs(assetId: DecimalId, ownMs: number): number {
    const known = this.known.get(assetId);
    return known === undefined ? ownMs : Math.max(ownMs, known.lastMs + 1);
  }

  /** Records that an event stamped `atMs` went to the webhook for the asset, and whether its set holds the asset now. */
  record(assetId: DecimalId, assetUuid: string | null, webhookId: string, member: boolean, atMs: number): void {
    let entry = this.known.get(assetId);
    if (entry === undefined) {
      entry = { webhooks: new Set(), lastMs: atMs, assetUuid, sentAt: new Map() };
      this.known.set(assetId, entry);
    }
    if (member) {
      entry.webhooks.add(webhookId);
      entry.sentAt.set(webhookId, new Date(atMs).toISOString());
    } else {
      entry.webhooks.delete(webhookId);
      entry.sentAt.delete(webhookId);
    }
    entry.lastMs = Math.max(entry.lastMs, atMs);
    if (assetUuid !== null) entry.assetUuid = assetUuid;
    this.current.set(assetId, entry);
  }

  /** The chunk's changes, to be written with it; the next load lays them over what it reads. */
  takeChanges(): MemberChange[] {
    const changes: MemberChange[] = [];
    for (const [assetId, entry] of this.current)
      changes.push({
        assetId,
        assetUuid: entry.assetUuid,
        webhooks: [...entry.webhooks],
        lastMs: entry.lastMs,
        sentAt: new Map(entry.sentAt),
      });
    this.current.clear();
    this.previous = [this.previous.at(-1) ?? [], changes];
    return changes;
  }
}

const MEMBER_COLUMNS: ReadonlyArray<Column<readonly MemberChange[]>> = [
  { name: 'asset_id', type: 'bigint', value: (rows, i) => rows[i]!.assetId },
  { name: 'asset_uuid', type: 'uuid', value: (rows, i) => rows[i]!.assetUuid },
  // An array of arrays cannot be one parameter (its rows differ in length): each goes as its literal's text.
  { name: 'webhooks', type: 'text', value: (rows, i) => arrayLiteral(rows[i]!.webhooks) },
  { name: 'last_event_at', type: 'timestamptz', value: (rows, i) => new Date(rows[i]!.lastMs).toISOString() },
  { name: 'sent_at', type: 'jsonb', value: (rows, i) => JSON.stringify(Object.fromEntries(rows[i]!.sentAt)) },
];

/** The upsert of `changes` (not empty) into asset_webhooks.mirror_members, its parameters added to `params`. */
export function memberUpsert(params: Params, changes: readonly MemberChange[]): string {
  const rows = unnestColumns(params, MEMBER_COLUMNS, changes, changes.length, 'm');
  return `insert into asset_webhooks.mirror_members (asset_id, asset_uuid, webhooks, last_event_at, sent_at)
     select m.asset_id, m.asset_uuid, m.webhooks::text[], m.last_event_at, m.sent_at from ${rows.text}
     on conflict (asset_id) do update
       set webhooks = excluded.webhooks, last_event_at = excluded.last_event_at, sent_at = excluded.sent_at,
           asset_uuid = coalesce(excluded.asset_uuid, mirror_members.asset_uuid), changed_at = clock_timestamp()`;
}

/** Writes `changes` in their own statement (reconcile). */
export async function writeMemberChanges(client: pg.PoolClient, changes: readonly MemberChange[]): Promise<void> {
  if (changes.length === 0) return;
  const params = new Params();
  const text = memberUpsert(params, changes);
  await client.query(text, params.values);
}
