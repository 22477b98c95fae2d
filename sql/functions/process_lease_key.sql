-- A `run` process holds a session advisory lock keyed by its id (its lease)
-- on a connection of its own for as long as it lives (src/service/process-lease.ts).
-- When the process dies, PostgreSQL ends its sessions and frees the lock, so
-- crash recovery can tell a live process's slow attempt from a dead process's
-- orphan and close the orphan's attempt at once.
--
-- The advisory lock key of a process's lease.
create or replace function asset_webhooks.process_lease_key(p_process_id text) returns bigint
language sql immutable parallel safe
as $$ select hashtextextended('asset_webhooks.process:' || p_process_id, 0) $$;
