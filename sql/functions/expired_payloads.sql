-- Payloads past their delivery window that are not in flight: waiting in the
-- queue (a disabled webhook, behind a stuck head) or for a retry. The expiry
-- sweep settles them as expired. Read through payloads_expiry and
-- payloads_in_flight. A paused webhook's clock stands still: its payloads are
-- not expired while it is paused (the resume moves series_started_at forward).
create or replace function asset_webhooks.expired_payloads(p_now timestamptz, p_expire_after_seconds integer, p_limit integer)
returns table (payload_id bigint, series integer)
language sql stable as $$
  (select p.payload_id, p.series from asset_webhooks.payloads p
   where p.status = 'pending' and not p.dispatched
     and p.series_started_at <= p_now - make_interval(secs => p_expire_after_seconds)
     and not exists (select 1 from asset_webhooks.webhooks w where w.webhook_id = p.webhook_id and w.paused_since is not null)
   order by p.series_started_at limit p_limit)
  union all
  (select p.payload_id, p.series from asset_webhooks.payloads p
   where p.status = 'pending' and p.dispatched and p.next_attempt_at is not null
     and p.series_started_at <= p_now - make_interval(secs => p_expire_after_seconds)
     and not exists (select 1 from asset_webhooks.webhooks w where w.webhook_id = p.webhook_id and w.paused_since is not null)
   limit p_limit)
$$;
