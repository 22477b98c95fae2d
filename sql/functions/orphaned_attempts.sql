-- Attempts in flight whose process is gone: its lease is free (see
-- process_gone) and the attempt started more than p_grace_seconds before
-- asset_webhooks.now(); or, for an attempt that names no process (a session
-- named otherwise), started more than p_nameless_after_seconds before. Crash
-- recovery closes them through transition_payloads as interrupted, or, when
-- in_flight.sent is false (a standby never reported sent), undoes them with
-- a given_back transition. Call it in a transaction of its own: process_gone holds
-- each lease it finds free until the transaction ends.
create or replace function asset_webhooks.orphaned_attempts(p_grace_seconds integer, p_nameless_after_seconds integer)
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz,
               sent boolean)
language sql volatile set search_path = pg_catalog, pg_temp as $$
  with c as materialized (select asset_webhooks.now() as now)
  select f.payload_id, f.webhook_id, f.series, f.attempt_no, p.series_started_at, f.sent
  from c, asset_webhooks.in_flight f
  join asset_webhooks.payloads p on p.payload_id = f.payload_id
  where f.next_attempt_at is null and p.status = 'pending' and p.series = f.series
    and ((f.process_id is not null and p_grace_seconds is not null
          and f.started_at < c.now - make_interval(secs => p_grace_seconds)
          and asset_webhooks.process_gone(f.process_id))
      or (f.process_id is null and f.started_at < c.now - make_interval(secs => p_nameless_after_seconds)))
$$;
