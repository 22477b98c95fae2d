-- rateLimit.adaptive: the rate in force of each adaptive webhook named by a
-- batch of attempt results, as complete_attempts describes: halved by a 429
-- or 503 (at most once a second, not below 1/s or perSecond when lower, its
-- bucket emptied), regained by a tenth of perSecond (at least 1/s) once a
-- second while the batch holds successes and no such answer, up to perSecond.
-- Time is asset_webhooks.now(). Writes only rows whose rate changes, in
-- webhook order.
create or replace function asset_webhooks.adapt_rates(p_transitions asset_webhooks.payload_transition[])
returns void
language plpgsql
-- Every row is reached by its key (see complete_attempts).
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set search_path = pg_catalog, pg_temp
as $$
declare
  v_now timestamptz := asset_webhooks.now();
begin
  with answers as (
    select p.webhook_id, bool_or(t.status_code in (429, 503)) as slowed,
           bool_or(t.status_code between 200 and 299) as ok
    from unnest(p_transitions) t
    join asset_webhooks.payloads p on p.payload_id = t.payload_id
    where t.kind = 'attempt_result' and t.status_code is not null
    group by p.webhook_id
  ),
  decided as (
    select q.webhook_id, a.slowed
    from asset_webhooks.webhook_queues q
    join answers a on a.webhook_id = q.webhook_id
    where q.rate_adaptive and q.rate_per_second is not null
      and ((a.slowed and (q.rate_decreased_at is null or q.rate_decreased_at <= v_now - interval '1 second'))
           or (not a.slowed and a.ok and q.rate_current < q.rate_per_second
               and q.rate_changed_at <= v_now - interval '1 second'))
    order by q.webhook_id
    for update of q
  )
  update asset_webhooks.webhook_queues q
  set rate_current = case when d.slowed then greatest(least(1, q.rate_per_second), q.rate_current / 2)
                          else least(q.rate_per_second, q.rate_current + greatest(1, q.rate_per_second / 10)) end,
      rate_changed_at = v_now,
      rate_decreased_at = case when d.slowed then v_now else q.rate_decreased_at end,
      -- The tokens earned so far at the rate that held until now.
      rate_tokens = case when d.slowed then 0
                         else asset_webhooks.bucket_tokens(q.rate_tokens, q.rate_current, q.rate_burst,
                                                           q.rate_refilled_at, v_now) end,
      rate_refilled_at = v_now
  from decided d
  where q.webhook_id = d.webhook_id;
end $$;
