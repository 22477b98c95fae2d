import type pg from 'pg';
import { Params, unnestColumns, type Column } from '../db/columns.js';
import type { DecimalId } from '../interfaces.js';

/** An asset as one mirror webhook knows it: in its set or not, and the eventTimestamp last sent for it. */
export interface MemberState {
  readonly member: boolean;
  /** Epoch milliseconds; -Infinity when nothing was ever sent. */
  readonly lastMs: number;
}

/** One asset's new state for one mirror webhook, as asset_webhooks.mirror_members stores it. */
export interface MemberChange extends MemberState {
  readonly webhookId: string;
  readonly assetId: DecimalId;
  readonly assetUuid: string | null;
}

const NEVER_TOLD: MemberState = { member: false, lastMs: -Infinity };

const key = (webhookId: string, assetId: DecimalId): string => `${webhookId}\u0000${assetId}`;

/**
 * The membership of the assets of one chunk, for the mirror webhooks of a
 * routing. Only the holder of the coalescing lock writes
 * asset_webhooks.mirror_members (a coalescing run, or a reconcile chunk), so
 * what a chunk reads there is exact but for the changes this holder has not
 * committed yet: those of the chunk before, whose write may still be under way
 * while the next chunk is routed (see coalesce/run.ts). `load` lays them over
 * what it reads, so they must be taken (takeChanges) once per chunk, in order,
 * and each chunk's write must commit before the chunk after next is loaded.
 */
export class MirrorMembers {
  private readonly known = new Map<string, MemberState>();
  private previous: MemberChange[] = [];
  private readonly current = new Map<string, MemberChange>();

  constructor(private readonly webhookIds: readonly string[]) {}

  /** Reads the membership of `assetIds` (decimal) for every mirror webhook: the chunk's, before it is routed. */
  async load(client: pg.Pool | pg.PoolClient, assetIds: readonly DecimalId[]): Promise<void> {
    this.known.clear();
    if (this.webhookIds.length === 0 || assetIds.length === 0) return;
    const { rows } = await client.query<{ webhook_id: string; asset_id: string; member: boolean; last_ms: string }>(
      `select m.webhook_id, m.asset_id::text as asset_id, m.member,
              (extract(epoch from m.last_event_at) * 1000)::bigint::text as last_ms
       from asset_webhooks.mirror_members m
       where m.webhook_id = any($1::text[]) and m.asset_id = any($2::bigint[])`,
      [this.webhookIds, [...new Set(assetIds)]],
    );
    for (const row of rows)
      this.known.set(key(row.webhook_id, row.asset_id), { member: row.member, lastMs: Number(row.last_ms) });
    for (const change of this.previous) this.known.set(key(change.webhookId, change.assetId), change);
  }

  get(webhookId: string, assetId: DecimalId): MemberState {
    return this.known.get(key(webhookId, assetId)) ?? NEVER_TOLD;
  }

  /** Records that an event went to the webhook for the asset, and whether the asset is in its set now. */
  set(change: MemberChange): void {
    const k = key(change.webhookId, change.assetId);
    this.known.set(k, change);
    this.current.set(k, change);
  }

  /** The chunk's changes, to be written with it; the next load lays them over what it reads. */
  takeChanges(): MemberChange[] {
    const changes = [...this.current.values()];
    this.current.clear();
    this.previous = changes;
    return changes;
  }
}

const MEMBER_COLUMNS: ReadonlyArray<Column<readonly MemberChange[]>> = [
  { name: 'webhook_id', type: 'text', value: (rows, i) => rows[i]!.webhookId },
  { name: 'asset_id', type: 'bigint', value: (rows, i) => rows[i]!.assetId },
  { name: 'asset_uuid', type: 'uuid', value: (rows, i) => rows[i]!.assetUuid },
  { name: 'member', type: 'boolean', value: (rows, i) => rows[i]!.member },
  { name: 'last_event_at', type: 'timestamptz', value: (rows, i) => new Date(rows[i]!.lastMs).toISOString() },
];

/** The upsert of `changes` (not empty) into asset_webhooks.mirror_members, its parameters added to `params`. */
export function memberUpsert(params: Params, changes: readonly MemberChange[]): string {
  const rows = unnestColumns(params, MEMBER_COLUMNS, changes, changes.length, 'm');
  return `insert into asset_webhooks.mirror_members (webhook_id, asset_id, asset_uuid, member, last_event_at)
     select m.webhook_id, m.asset_id, m.asset_uuid, m.member, m.last_event_at from ${rows.text}
     on conflict (webhook_id, asset_id) do update
       set member = excluded.member, last_event_at = excluded.last_event_at,
           asset_uuid = coalesce(excluded.asset_uuid, mirror_members.asset_uuid), changed_at = clock_timestamp()`;
}

/** Writes `changes` in their own statement (reconcile). */
export async function writeMemberChanges(client: pg.PoolClient, changes: readonly MemberChange[]): Promise<void> {
  if (changes.length === 0) return;
  const params = new Params();
  const text = memberUpsert(params, changes);
  await client.query(text, params.values);
}
