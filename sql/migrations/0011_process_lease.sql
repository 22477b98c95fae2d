-- 0011: an attempt whose process is gone is handed back within about a
-- minute, not ten.
--
-- A `run` process killed mid-POST (kill -9, an OOM kill, an orchestrator's
-- grace period running out) leaves its attempt started and never settled.
-- Maintenance handed such a payload back only ten minutes after the attempt
-- started, since nothing said whether the process that started it was still
-- trying to record its result; a concurrency-1 webhook waited that long.
--
-- Each attempt now records which process started it, and each `run` process
-- holds a session advisory lock, keyed by its id, on a connection of its own
-- (the lease) for as long as it lives. When a process dies, PostgreSQL ends
-- its sessions and the lock is free: maintenance can tell a live process's
-- slow attempt from a dead process's orphan.
--
-- The id comes from the session setting asset_webhooks.process_id, which the
-- service sets on every connection of its pool. The column's default reads
-- it, so every statement that starts an attempt (settle_attempts' chains and
-- the delivery job's own insert) records it without being restated. A session
-- without the setting (a pooler that drops startup options, a test) records
-- null, and such an attempt is handed back by the ten-minute rule as before.
alter table asset_webhooks.attempts add column process_id text;
alter table asset_webhooks.attempts
  alter column process_id set default nullif(current_setting('asset_webhooks.process_id', true), '');

comment on column asset_webhooks.attempts.process_id is
  'The run process that started the attempt (its lease: asset_webhooks.process_lease_key); null when the session did not say';

-- The advisory lock key of a process's lease.
create function asset_webhooks.process_lease_key(p_process_id text) returns bigint
language sql immutable parallel safe
as $$ select hashtextextended('asset_webhooks.process:' || p_process_id, 0) $$;

-- Whether the process is gone: nobody holds its lease. Tried with a
-- transaction-level lock, released when the caller's transaction ends, so it
-- never blocks and never keeps a returning process from taking its lease back.
create function asset_webhooks.process_gone(p_process_id text) returns boolean
language sql volatile
as $$ select pg_try_advisory_xact_lock(asset_webhooks.process_lease_key(p_process_id)) $$;
