-- Attempts in flight whose process is gone: its lease is free (see
-- process_gone) and the attempt started more than p_grace_seconds before
-- asset_webhooks.now(); or, for an attempt that names no process (a session
-- named otherwise), started more than p_nameless_after_seconds before. Crash
-- recovery closes them through transition_payloads as interrupted, or, when
-- `sent` is false (a standby never reported sent), undoes them with
-- a given_back transition. Call it in a transaction of its own: process_gone holds
-- each lease it finds free until the transaction ends.
create or replace function asset_webhooks.orphaned_attempts(p_grace_seconds integer, p_nameless_after_seconds integer)
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz,
               sent boolean)
language sql volatile set search_path = pg_catalog, pg_temp as $$
  with c as materialized (select asset_webhooks.now() as now)
  select p.payload_id, p.webhook_id, p.series, p.attempts, p.series_started_at, a.sent
  from c, asset_webhooks.payloads p
  join asset_webhooks.attempts a on a.payload_id = p.payload_id and a.series = p.series and a.attempt_no = p.attempts
  where p.status = 'pending' and p.dispatched and p.next_attempt_at is null and a.outcome is null
    and ((a.process_id is not null and p_grace_seconds is not null
          and a.started_at < c.now - make_interval(secs => p_grace_seconds)
          and asset_webhooks.process_gone(a.process_id))
      or (a.process_id is null and a.started_at < c.now - make_interval(secs => p_nameless_after_seconds)))
$$;
