import type pg from 'pg';

/**
 * Index entries and heap rows of `table` read by the session's current
 * transaction: its own counts, which no other backend's late-flushed
 * statistics reach (an idle backend flushes its pending counts about a second
 * after its last statement). The counts read are those not yet flushed, so
 * call `select pg_stat_force_next_flush()` on the session before its `begin`.
 */
export async function rowsReadInTransaction(
  session: pg.ClientBase,
  table = 'asset_webhooks.payloads',
): Promise<number> {
  const { rows } = await session.query<{ n: string }>(
    `select pg_stat_get_xact_tuples_returned($1::regclass)
          + (select coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0) from pg_index
             where indrelid = $1::regclass) as n`,
    [table],
  );
  return Number(rows[0]!.n);
}

/**
 * Heap rows of `table` the session's current transaction has read: by
 * sequential scans and fetched through indexes (index entries not counted).
 * Flush the session's pending counts first, as for rowsReadInTransaction.
 */
export async function heapRowsReadInTransaction(
  session: pg.ClientBase,
  table = 'asset_webhooks.payloads',
): Promise<number> {
  const { rows } = await session.query<{ n: string }>(
    `select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n from pg_stat_xact_user_tables
     where relid = $1::regclass`,
    [table],
  );
  return Number(rows[0]!.n);
}
