-- Records the rateLimit of each webhook of a `run` process's configuration
-- (at its start, at every reload and before every coalescing run, beside
-- record_configuration) in the webhook's queue row, where every process's
-- claims read it: the limit is shared, never per process. p_per_second null:
-- the webhook has no limit.
--
-- Written only when it changes, so a recording that changes nothing leaves
-- the bucket as it is. A new or changed limit starts at its full rate with a
-- full bucket (rate_burst tokens): adaptive halvings of the old limit are
-- forgotten. During a rolling change, processes with different limits for
-- one webhook each write theirs at each recording: the limit flips, and each
-- flip starts a full bucket. A limit removed leaves the row, with
-- rate_per_second null, and its wait total, which the metric counts on from
-- if a limit comes back. The rows that change are locked in webhook order, as
-- adapt_rates locks them, so two recordings, or a recording and a completer,
-- never wait on each other in a circle. Every time is asset_webhooks.now().
create or replace function asset_webhooks.record_rate_limits(p_webhook_ids text[], p_per_second double precision[],
                                                             p_burst integer[], p_adaptive boolean[])
returns void
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  v_now timestamptz := asset_webhooks.now();
begin
  -- An insert and an update rather than an upsert: ON CONFLICT DO UPDATE
  -- locks every existing row, changed or not, and a recording that changes
  -- nothing (before every coalescing run) must write nothing, not even a lock.
  insert into asset_webhooks.webhook_queues as q
    (webhook_id, rate_per_second, rate_burst, rate_adaptive, rate_current, rate_changed_at, rate_tokens, rate_refilled_at)
  select c.webhook_id, c.per_second, c.burst, coalesce(c.adaptive, false), c.per_second, v_now, c.burst, v_now
  from unnest(p_webhook_ids, p_per_second, p_burst, p_adaptive) as c(webhook_id, per_second, burst, adaptive)
  where c.per_second is not null
  order by c.webhook_id
  on conflict (webhook_id) do nothing;
  with changed as (
    select q.webhook_id, c.per_second, c.burst, coalesce(c.adaptive, false) as adaptive
    from asset_webhooks.webhook_queues q
    join unnest(p_webhook_ids, p_per_second, p_burst, p_adaptive) as c(webhook_id, per_second, burst, adaptive)
      on c.webhook_id = q.webhook_id
    where (q.rate_per_second, q.rate_burst, q.rate_adaptive)
          is distinct from (c.per_second, c.burst, coalesce(c.adaptive, false))
    order by q.webhook_id
    for update of q
  )
  update asset_webhooks.webhook_queues q
  set rate_per_second = c.per_second, rate_burst = c.burst, rate_adaptive = c.adaptive, rate_current = c.per_second,
      rate_changed_at = v_now, rate_decreased_at = null, rate_tokens = coalesce(c.burst, 0), rate_refilled_at = v_now,
      rate_held_seconds = q.rate_held_seconds
                          + coalesce(greatest(extract(epoch from v_now - q.rate_held_since), 0), 0),
      rate_held_since = null
  from changed c
  where q.webhook_id = c.webhook_id;
end $$;
