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
-- The id comes from the session's application_name, which the service sets
-- on every connection of its pool to `asset-webhooks run <process id>` (a
-- standard startup parameter that connection poolers pass on, and that shows
-- in pg_stat_activity which process a session belongs to). The column's
-- default reads it, so every statement that starts an attempt
-- (settle_attempts' chains and the delivery job's own insert) records it
-- without being restated. A session with another name (a database URL that
-- sets application_name itself, a test) records null, and such an attempt is
-- handed back by the ten-minute rule as before.

-- The run process of this session, from its application_name; null for any other session.
create function asset_webhooks.process_of_session() returns text
language sql stable parallel safe
as $$ select substring(current_setting('application_name')
                       from '^asset-webhooks run ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$') $$;

alter table asset_webhooks.attempts add column process_id text;
alter table asset_webhooks.attempts
  alter column process_id set default asset_webhooks.process_of_session();

comment on column asset_webhooks.attempts.process_id is
  'The run process that started the attempt (its lease: asset_webhooks.process_lease_key); null when the session did not say';

-- The advisory lock key of a process's lease.
create function asset_webhooks.process_lease_key(p_process_id text) returns bigint
language sql immutable parallel safe
as $$ select hashtextextended('asset_webhooks.process:' || p_process_id, 0) $$;

-- Whether the process is gone: nobody holds its lease. Tried with a
-- transaction-level lock, so it never waits. When the process is gone the
-- caller holds that lock until its transaction ends: meanwhile another probe
-- sees the lease held, and a process taking its lease back waits. Call it
-- in short transactions (maintenance's statement, trace, the runbook).
create function asset_webhooks.process_gone(p_process_id text) returns boolean
language sql volatile
as $$ select pg_try_advisory_xact_lock(asset_webhooks.process_lease_key(p_process_id)) $$;
