-- Whether the lock of asset_webhooks.session_locks named p_name is held: its
-- row names a session that still lives. The rule is also written in
-- src/db/session-lock.ts (HOLDER_GONE), which takes and frees these locks,
-- and in process_gone; a holder whose start time pg_stat_activity hides from
-- this role counts as alive while its pid is there.
create or replace function asset_webhooks.session_lock_held(p_name text) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
  select exists (select 1 from asset_webhooks.session_locks l
                 join pg_catalog.pg_stat_activity a
                   on a.pid = l.holder_pid and (a.backend_start = l.holder_started or a.backend_start is null)
                 where l.name = p_name)
$$;
