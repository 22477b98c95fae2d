-- Payloads past their delivery window (by asset_webhooks.now()) that are not
-- in flight: waiting in the queue (a disabled webhook, behind a stuck head)
-- or for a retry. The expiry sweep settles them as expired. Read through
-- payloads_expiry (passing over those in flight, at most the slots) and
-- in_flight. A paused webhook's clock stands
-- still: its payloads are not expired while it is paused (the resume moves
-- series_started_at forward). The cutoff is a scalar subquery, not a join:
-- only a value known before the scan bounds payloads_expiry's range, so a
-- sweep reads the payloads past it rather than the whole waiting queue.
create or replace function asset_webhooks.expired_payloads(p_expire_after_seconds integer, p_limit integer)
returns table (payload_id bigint, series integer)
language sql volatile set search_path = pg_catalog, pg_temp as $$
  -- One reading of the clock for both kinds.
  with c as materialized (select asset_webhooks.now() - make_interval(secs => p_expire_after_seconds) as started_by)
  (select p.payload_id, p.series from asset_webhooks.payloads p
   where p.status = 'pending'
     and p.series_started_at <= (select c.started_by from c)
     and not exists (select 1 from asset_webhooks.in_flight f where f.payload_id = p.payload_id)
     and not exists (select 1 from asset_webhooks.webhooks w where w.webhook_id = p.webhook_id and w.paused_since is not null)
   order by p.series_started_at limit p_limit)
  union all
  (select p.payload_id, p.series from asset_webhooks.in_flight f
   join asset_webhooks.payloads p on p.payload_id = f.payload_id
   where f.next_attempt_at is not null and p.status = 'pending'
     and p.series_started_at <= (select c.started_by from c)
     and not exists (select 1 from asset_webhooks.webhooks w where w.webhook_id = p.webhook_id and w.paused_since is not null)
   limit p_limit)
$$;
