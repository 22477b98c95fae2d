-- Records the rateLimit of each webhook of a `run` process's configuration
-- (at its start and at every reload, beside record_configuration) in the
-- webhook's queue row, where every process's claims read it: the limit is
-- shared, never per process. p_per_second null: the webhook has no limit.
--
-- Written only when it changes, so a reload that changes nothing leaves the
-- bucket as it is. A new or changed limit starts at its full rate with a
-- full bucket (rate_burst tokens): adaptive halvings of the old limit are
-- forgotten. A limit removed leaves the row, with rate_per_second null. The
-- rows are locked in webhook order, as complete_attempts locks them, so two
-- recordings, or a recording and a completer, never wait on each other in a
-- circle. Every time is asset_webhooks.now().
create or replace function asset_webhooks.record_rate_limits(p_webhook_ids text[], p_per_second double precision[],
                                                             p_burst integer[], p_adaptive boolean[])
returns void
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  v_now timestamptz := asset_webhooks.now();
begin
  perform from asset_webhooks.webhook_queues q
  where q.webhook_id = any(p_webhook_ids)
  order by q.webhook_id for update;
  insert into asset_webhooks.webhook_queues as q
    (webhook_id, rate_per_second, rate_burst, rate_adaptive, rate_current, rate_changed_at, rate_tokens, rate_refilled_at)
  select c.webhook_id, c.per_second, c.burst, coalesce(c.adaptive, false), c.per_second, v_now,
         coalesce(c.burst, 0), v_now
  from unnest(p_webhook_ids, p_per_second, p_burst, p_adaptive) as c(webhook_id, per_second, burst, adaptive)
  where c.per_second is not null
     or exists (select 1 from asset_webhooks.webhook_queues e where e.webhook_id = c.webhook_id)
  order by c.webhook_id
  on conflict (webhook_id) do update
  set rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst,
      rate_adaptive = excluded.rate_adaptive, rate_current = excluded.rate_current,
      rate_changed_at = v_now, rate_tokens = excluded.rate_tokens, rate_refilled_at = v_now,
      rate_held_seconds = q.rate_held_seconds
                          + coalesce(greatest(extract(epoch from v_now - q.rate_held_since), 0), 0),
      rate_held_since = null
  where (q.rate_per_second, q.rate_burst, q.rate_adaptive)
        is distinct from (excluded.rate_per_second, excluded.rate_burst, excluded.rate_adaptive);
end $$;
