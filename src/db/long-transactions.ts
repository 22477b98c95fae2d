import type pg from 'pg';

/** The oldest open transaction that holds back cleanup in this database, as far as the role may see. */
export interface OldTransaction {
  readonly seconds: number;
  readonly pid: number | null;
  readonly applicationName: string | null;
  readonly state: string | null;
}

/**
 * Reads the oldest open transaction of this database that holds a snapshot
 * (backend_xmin), or a prepared transaction, other than the caller's own.
 * Without pg_read_all_stats a role sees only its own sessions' transactions.
 * Its age is counted by the one clock (asset_webhooks.now()), as every other
 * time the service decides on.
 */
export async function oldestTransactionAge(pool: pg.Pool): Promise<OldTransaction | null> {
  const { rows } = await pool.query<{
    seconds: number;
    pid: number | null;
    application_name: string | null;
    state: string | null;
  }>(
    `select extract(epoch from asset_webhooks.now() - started)::float8 as seconds, pid, application_name, state
     from (
       select xact_start as started, pid, application_name, state from pg_stat_activity
       where datname = current_database() and backend_xmin is not null and pid <> pg_backend_pid() and xact_start is not null
       union all
       select prepared, null, 'prepared transaction ' || gid, 'prepared' from pg_prepared_xacts where database = current_database()
     ) t
     order by started limit 1`,
  );
  const row = rows[0];
  return row
    ? { seconds: Math.max(0, row.seconds), pid: row.pid, applicationName: row.application_name, state: row.state }
    : null;
}
