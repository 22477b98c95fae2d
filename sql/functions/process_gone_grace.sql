-- Crash recovery's grace as the `run` process p_process_id sees it: how long
-- after its start an attempt of a process that is gone is closed (the request
-- timeout plus five seconds: a live process whose lease was lost for a moment
-- has finished its request by then), or null, taking no process for gone,
-- while p_process_id has not held its own lease for 15 seconds. After the
-- database comes back from an outage every lease is free until its process
-- takes it again (within seconds: src/service/process-lease.ts); a process
-- that has held its own for this long has given every live one that time.
--
-- The lease's age is counted on the one clock: the lease's session writes
-- taken_at by asset_webhooks.now() when it takes the lease, and a lease
-- whose session is gone is no lease (session_lock_held). Tests move taken_at
-- back instead of waiting the 15 seconds.
create or replace function asset_webhooks.process_gone_grace(p_process_id text, p_request_timeout_seconds integer)
returns integer
language sql volatile set search_path = pg_catalog, pg_temp as $$
  select p_request_timeout_seconds + 5
  from asset_webhooks.session_locks l
  where l.name = 'process:' || p_process_id
    and l.taken_at <= asset_webhooks.now() - interval '15 seconds'
    and asset_webhooks.session_lock_held(l.name)
$$;
