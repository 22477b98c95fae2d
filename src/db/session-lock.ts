import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';

/**
 * Locks that outlive a transaction: the coalescing run, a migrate, a backfill,
 * a reconcile of a webhook, a `run` process's lease. The asset database is
 * shared, and any role that can connect can take any advisory lock key, so
 * each is a row of this table, which only the service's roles can write.
 *
 * A row names the session that holds the lock by its backend's pid and start
 * time. The lock is held while that session lives, so a process that dies
 * frees its locks when PostgreSQL ends its sessions, as with a session
 * advisory lock, and without a transaction left open (which would pin
 * vacuum's horizon for the whole database) or a heartbeat. Whether a session
 * lives is read from pg_stat_activity, which shows another role's
 * backend_start only to a member of that role or of pg_read_all_stats: a
 * holder whose start time cannot be read counts as alive while its pid is
 * there (a lock is never taken twice; see docs/operations.md).
 *
 * Created by `migrate` before anything else (it serialises migrate itself),
 * hence here rather than in a migration.
 */
export const SESSION_LOCKS_TABLE = `create table if not exists asset_webhooks.session_locks (
  name text primary key,
  holder_pid integer not null,
  holder_started timestamptz not null,
  taken_at timestamptz not null default clock_timestamp())`;

/**
 * Whether the session recorded in the row `l` is gone. The same rule is
 * written in asset_webhooks.session_lock_held (sql/functions), which SQL
 * calls; this one is inlined because `migrate` takes its lock before it
 * creates any function.
 */
const HOLDER_GONE = `not exists (select 1 from pg_catalog.pg_stat_activity a
                     where a.pid = l.holder_pid and (a.backend_start = l.holder_started or a.backend_start is null))`;

/**
 * Takes the lock for this session when it is free, or when its holder's
 * session is gone, or when this session holds it already. Waits for a
 * transaction that holds the row (process_gone during crash recovery).
 */
const TAKE = `insert into asset_webhooks.session_locks as l (name, holder_pid, holder_started)
  select $1, a.pid, a.backend_start from pg_catalog.pg_stat_activity a where a.pid = pg_catalog.pg_backend_pid()
  on conflict (name) do update
  set holder_pid = excluded.holder_pid, holder_started = excluded.holder_started, taken_at = pg_catalog.clock_timestamp()
  where (l.holder_pid = excluded.holder_pid and l.holder_started = excluded.holder_started) or ${HOLDER_GONE}
  returning true as taken`;

/** How often a lock that is held elsewhere is asked for again. */
export const POLL_MS = 100;

export interface TakeOptions {
  /** How long to wait for a lock held elsewhere, in ms; Infinity waits until it is free. Default 0: try once. */
  readonly waitMs?: number;
}

/**
 * Takes the named lock for the session (a connection checked out for as long
 * as the lock is held); returns false when another live session still held
 * it after `waitMs`. Run it outside a transaction: every try reads
 * pg_stat_activity afresh, and none leaves a transaction open while waiting.
 */
export async function takeSessionLock(
  session: pg.ClientBase,
  name: string,
  { waitMs = 0 }: TakeOptions = {},
): Promise<boolean> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const { rows } = await session.query(TAKE, [name]);
    if (rows.length > 0) return true;
    const left = deadline - performance.now();
    if (left <= 0) return false;
    await sleep(Math.min(POLL_MS, left));
  }
}

/** Whether a live session holds the named lock (asset_webhooks.session_lock_held). */
export async function sessionLockHeld(client: pg.ClientBase, name: string): Promise<boolean> {
  const { rows } = await client.query<{ held: boolean }>('select asset_webhooks.session_lock_held($1) as held', [name]);
  return rows[0]?.held === true;
}

/** Frees the named lock if this session holds it. */
export async function releaseSessionLock(session: pg.ClientBase, name: string): Promise<void> {
  await session.query(
    'delete from asset_webhooks.session_locks where name = $1 and holder_pid = pg_catalog.pg_backend_pid()',
    [name],
  );
}
