import type pg from 'pg';

/** The event types a payload's events may have, for `--event-type`: the captured ones and UNMATCHED. */
export const REPLAY_EVENT_TYPES = ['CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION', 'UNMATCHED'] as const;

/**
 * Which payloads a replay takes: those of `webhookId` that are delivered
 * and were created within [from, to), in payload order. The window is on
 * the payload's creation (the coalescing run, or backfill, that packed its
 * events), which never changes: a receiver that lost what it got since T is
 * given every payload made since T, whatever retries or earlier replays
 * delivered it again later. With `assetIds` or `eventTypes`, a payload is
 * taken when at least one of its events matches both (either left out
 * matches any), and it is sent whole: the same body, with its other events.
 */
export interface ReplaySelection {
  readonly webhookId: string;
  readonly from: Date;
  readonly to: Date;
  /** Decimal strings: asset ids may exceed 2^53. Null: any asset. */
  readonly assetIds: readonly string[] | null;
  /** Null: any type. */
  readonly eventTypes: readonly string[] | null;
}

/**
 * The condition on payloads `p` (with `b`, the payload that holds p's body
 * when body_of names one) of a selection given as parameters $1 to $5:
 * webhook, from, to, assets, event types.
 */
export const SELECTED = `p.webhook_id = $1 and p.status = 'delivered' and p.created_at >= $2 and p.created_at < $3
  and (($4::bigint[] is null and $5::text[] is null) or exists (
    select 1 from jsonb_array_elements(coalesce(b.body, p.body)::jsonb -> 'events') e
    where ($4::bigint[] is null or (e ->> 'assetId')::bigint = any($4::bigint[]))
      and ($5::text[] is null or e ->> 'eventType' = any($5::text[]))))`;

/** The parameters $1 to $5 of SELECTED. */
export function selectionParameters(selection: ReplaySelection): unknown[] {
  return [selection.webhookId, selection.from, selection.to, selection.assetIds, selection.eventTypes];
}

/**
 * The lowest and highest payload ids created in the window when the replay
 * starts: the walk reads only payloads between them, so it reads no payload
 * before or after the window, and takes none created while it runs. Read
 * through the index on created_at (`payload_id + 0` keeps the planner from
 * walking the primary key from either end of the whole history instead), at
 * the cost of the window's size. Null when the window holds no payload.
 */
export async function windowBounds(
  client: pg.PoolClient,
  selection: ReplaySelection,
): Promise<{ readonly first: number; readonly last: number } | null> {
  const { rows } = await client.query<{ first: string | null; last: string | null }>(
    `select min(payload_id + 0)::text as first, max(payload_id + 0)::text as last
     from asset_webhooks.payloads where created_at >= $1 and created_at < $2`,
    [selection.from, selection.to],
  );
  const row = rows[0];
  return row?.first == null || row.last == null ? null : { first: Number(row.first), last: Number(row.last) };
}

/** What a selection holds after `after`, up to `last`: payloads, their events, and the first that carries UNMATCHED. */
export interface SelectionCount {
  readonly payloads: number;
  readonly events: number;
  readonly firstPayloadId: number | null;
  readonly lastPayloadId: number | null;
  readonly firstUnmatched: number | null;
}

/**
 * Counts the selected payloads after `after` up to `last` in one statement
 * (the database aggregates; nothing is gathered here), and finds the first
 * that carries UNMATCHED events, for the refusal of a target that is not a
 * mirror webhook: read only when `unmatchedMatters`.
 */
export async function countSelection(
  client: pg.PoolClient | pg.Pool,
  selection: ReplaySelection,
  range: { readonly after: number; readonly last: number },
  unmatchedMatters: boolean,
): Promise<SelectionCount> {
  const { rows } = await client.query<{
    payloads: string;
    events: string;
    first: string | null;
    last: string | null;
    unmatched: string | null;
  }>(
    `select count(*)::text as payloads, coalesce(sum(p.event_count), 0)::text as events,
            min(p.payload_id)::text as first, max(p.payload_id)::text as last,
            min(p.payload_id) filter (where $8 and strpos(coalesce(b.body, p.body), '"eventType":"UNMATCHED"') > 0)::text
              as unmatched
     from asset_webhooks.payloads p left join asset_webhooks.payloads b on b.payload_id = p.body_of
     where ${SELECTED} and p.payload_id > $6 and p.payload_id <= $7`,
    [...selectionParameters(selection), range.after, range.last, unmatchedMatters],
  );
  const row = rows[0]!;
  const id = (value: string | null): number | null => (value === null ? null : Number(value));
  return {
    payloads: Number(row.payloads),
    events: Number(row.events),
    firstPayloadId: id(row.first),
    lastPayloadId: id(row.last),
    firstUnmatched: id(row.unmatched),
  };
}

/**
 * The next batch of the selection after `after` up to `last`, in payload
 * order, locked (FOR UPDATE) in that order as a redelivery locks its rows,
 * so a delivery settling one of them meanwhile waits rather than interleaves.
 */
export async function nextBatch(
  client: pg.PoolClient,
  selection: ReplaySelection,
  range: { readonly after: number; readonly last: number },
  size: number,
): Promise<Array<{ payloadId: number; eventCount: number }>> {
  const { rows } = await client.query<{ payload_id: string; event_count: number }>(
    `select p.payload_id::text, p.event_count
     from asset_webhooks.payloads p left join asset_webhooks.payloads b on b.payload_id = p.body_of
     where ${SELECTED} and p.payload_id > $6 and p.payload_id <= $7
     order by p.payload_id limit $8 for update of p`,
    [...selectionParameters(selection), range.after, range.last, size],
  );
  return rows.map((row) => ({ payloadId: Number(row.payload_id), eventCount: row.event_count }));
}
