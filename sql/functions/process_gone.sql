-- A `run` process holds the session lock named 'process:' and its id (its
-- lease, a row of asset_webhooks.session_locks) on a connection of its own
-- for as long as it lives (src/service/process-lease.ts). When the process
-- dies, PostgreSQL ends its sessions, so crash recovery can tell a live
-- process's slow attempt from a dead process's orphan and close the orphan's
-- attempt at once.
--
-- Whether the process is gone: its lease row names no live session, or there
-- is none (the process gave its lease up). Never waits: a lease row that
-- another transaction holds (another probe that found it gone, or the
-- process taking it back) counts as held. When the process is gone the
-- caller holds its row until its transaction ends: meanwhile another probe
-- sees the lease held, and a process taking its lease back waits. Call it in
-- short transactions (orphaned_attempts, trace, the runbook).
create or replace function asset_webhooks.process_gone(p_process_id text) returns boolean
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
declare
  v_name text := 'process:' || p_process_id;
  v_pid integer;
  v_started timestamptz;
begin
  select l.holder_pid, l.holder_started into v_pid, v_started
  from asset_webhooks.session_locks l where l.name = v_name
  for update skip locked;
  if not found then
    return not exists (select 1 from asset_webhooks.session_locks l where l.name = v_name);
  end if;
  return not exists (select 1 from pg_catalog.pg_stat_activity a
                     where a.pid = v_pid and (a.backend_start = v_started or a.backend_start is null));
end $$;
