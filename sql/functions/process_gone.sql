-- Whether the process is gone: nobody holds its lease. Tried with a
-- transaction-level lock, so it never waits. When the process is gone the
-- caller holds that lock until its transaction ends: meanwhile another probe
-- sees the lease held, and a process taking its lease back waits. Call it
-- in short transactions (orphaned_attempts, trace, the runbook).
create or replace function asset_webhooks.process_gone(p_process_id text) returns boolean
language sql volatile
as $$ select pg_try_advisory_xact_lock(asset_webhooks.process_lease_key(p_process_id)) $$;
