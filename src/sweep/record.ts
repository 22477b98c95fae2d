import type pg from 'pg';
import type { SweepKind } from './lock.js';

/**
 * A sweep's resume record: a row of asset_webhooks.backfills,
 * asset_webhooks.reconciles or asset_webhooks.replays, with its keyset position and its totals over
 * every run of the sweep, by column, each with its SQL type.
 */
export interface SweepRecord {
  readonly kind: SweepKind;
  readonly columns: Readonly<Record<string, string>>;
}

/** A column's value as a chunk leaves it: a number, a decimal string, text or JSON text; null for none. */
export type RecordValue = string | number | null;

/** Each kind's resume table, spelled out so a reader (and the one-writer scan) sees which table a sweep writes. */
const RESUME_TABLES = {
  backfill: 'asset_webhooks.backfills',
  reconcile: 'asset_webhooks.reconciles',
  replay: 'asset_webhooks.replays',
} as const satisfies Record<SweepKind, string>;

/**
 * Records one chunk, in the chunk's transaction (the one that writes its
 * payloads and events): the position and totals it leaves (`to`), and
 * `completed` ends the sweep. Refuses when the record is no longer at the
 * position the chunk was read from (`from`), or no longer running: the
 * chunk would be sent twice, and its transaction is rolled back.
 */
export async function recordSweepChunk(
  client: pg.PoolClient,
  record: SweepRecord,
  id: number,
  change: {
    readonly from: Readonly<Record<string, RecordValue>>;
    readonly to: Readonly<Record<string, RecordValue>>;
    readonly completed: boolean;
  },
): Promise<void> {
  const values: unknown[] = [id, change.completed];
  const placeholder = (column: string, value: RecordValue): string =>
    `$${values.push(value)}::${record.columns[column] ?? 'text'}`;
  const set = Object.entries(change.to).map(([column, value]) => `${column} = ${placeholder(column, value)}`);
  const at = Object.entries(change.from).map(
    ([column, value]) => `${column} is not distinct from ${placeholder(column, value)}`,
  );
  const { rowCount } = await client.query(
    `update ${RESUME_TABLES[record.kind]}
     set ${set.join(', ')}, updated_at = clock_timestamp(),
         status = case when $2 then 'completed' else status end, finished_at = case when $2 then clock_timestamp() end
     where ${record.kind}_id = $1 and status = 'running' ${at.map((condition) => `and ${condition}`).join(' ')}`,
    values,
  );
  if (rowCount !== 1) {
    throw new Error(
      `${record.kind} ${id}: expected it running at ${JSON.stringify(change.from)}, but another process moved it; this chunk is rolled back`,
    );
  }
}
