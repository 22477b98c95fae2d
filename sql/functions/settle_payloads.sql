-- The one statement that changes a pending payload's state after a claim:
-- every attempt's result, an interrupted attempt closed by crash recovery,
-- and the expiry of a payload that is not in flight. The caller's policy
-- (src/delivery/policy/next-state.ts) has decided each outcome:
--   p_outcomes: delivered | retry (at p_retry_at) | rejected | retries_exhausted | expired
-- An entry with an attempt number is an attempt's result: it applies only
-- while that attempt is still the payload's unfinished attempt in flight; an
-- entry without one (an expiry) only while the payload is not in flight. An
-- entry that no longer applies (an operator redelivered the payload, another
-- process closed the attempt first) still records the attempt's result, as a
-- plain failed try (outcome 'retry'), and answers applied = false.
--
-- p_started_at, when given, is when the attempt's request was sent: it
-- replaces the claim's time as the attempt's start (a standby is sent after
-- its claim: see claim_payloads).
--
-- A retry keeps its slot (dispatched) until its time; a final outcome frees
-- it. p_receiver_failed (null: not the receiver's verdict) and p_hold_until
-- update the webhook's health: the latest verdict of the batch wins (by
-- p_at, then by position), a
-- failure keeps the first failure's time, and hold_until only moves later.
create or replace function asset_webhooks.settle_payloads(
  p_payload_ids bigint[], p_series integer[], p_attempts integer[],
  p_duration_ms integer[], p_status_codes integer[], p_error_classes text[], p_error_messages text[], p_excerpts text[],
  p_outcomes text[], p_at timestamptz[], p_retry_at timestamptz[],
  p_receiver_failed boolean[], p_hold_until timestamptz[], p_started_at timestamptz[] default null
) returns table (idx integer, applied boolean)
language plpgsql
-- Planned at each call, as claim_payloads.
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
  v_applied boolean[];
begin
  -- In payload order, so that concurrent batches never wait on each other in a cycle.
  perform 1 from asset_webhooks.payloads p where p.payload_id = any(p_payload_ids) order by p.payload_id for update;

  -- A payload named twice in one batch is settled by its first entry only.
  select array_agg(coalesce(
           o.first and p.status = 'pending' and p.series = o.series
           and case when o.attempt is null then not (p.dispatched and p.next_attempt_at is null)
                    else p.attempts = o.attempt and p.dispatched and p.next_attempt_at is null
                         and exists (select 1 from asset_webhooks.attempts a
                                     where a.payload_id = o.payload_id and a.series = o.series
                                       and a.attempt_no = o.attempt and a.outcome is null)
               end, false) order by o.i)
  into v_applied
  from (select u.*, row_number() over (partition by u.payload_id order by u.i) = 1 as first
        from unnest(p_payload_ids, p_series, p_attempts) with ordinality as u(payload_id, series, attempt, i)) o
  left join asset_webhooks.payloads p on p.payload_id = o.payload_id;

  update asset_webhooks.attempts a
  set duration_ms = r.duration_ms, status_code = r.status_code, error_class = r.error_class, error_message = r.error_message,
      response_excerpt = r.excerpt, outcome = case when v_applied[r.i] then r.outcome else 'retry' end,
      started_at = coalesce(p_started_at[r.i], a.started_at)
  -- One entry per attempt, its first: an UPDATE joined to several would take any one of them.
  from (select distinct on (u.payload_id, u.series, u.attempt) u.*
        from unnest(p_payload_ids, p_series, p_attempts, p_duration_ms, p_status_codes, p_error_classes, p_error_messages, p_excerpts, p_outcomes)
             with ordinality as u(payload_id, series, attempt, duration_ms, status_code, error_class, error_message, excerpt, outcome, i)
        order by u.payload_id, u.series, u.attempt, u.i) r
  where r.attempt is not null and a.payload_id = r.payload_id and a.series = r.series and a.attempt_no = r.attempt
    and a.outcome is null;

  update asset_webhooks.payloads p
  set last_status_code = case when r.attempt is null then p.last_status_code else r.status_code end,
      last_error = case when r.attempt is null then p.last_error
                        when r.error_class is null then null
                        else r.error_class || ': ' || coalesce(r.error_message, '') end,
      status = case r.outcome when 'delivered' then 'delivered' when 'retry' then 'pending' else 'dead_lettered' end,
      delivered_at = case when r.outcome = 'delivered' then r.at end,
      dead_letter_reason = case when r.outcome not in ('delivered', 'retry') then r.outcome end,
      dead_lettered_at = case when r.outcome not in ('delivered', 'retry') then r.at end,
      dispatched = (r.outcome = 'retry'),
      next_attempt_at = case when r.outcome = 'retry' then r.retry_at end
  from unnest(p_payload_ids, p_attempts, p_status_codes, p_error_classes, p_error_messages, p_outcomes, p_at, p_retry_at)
       with ordinality as r(payload_id, attempt, status_code, error_class, error_message, outcome, at, retry_at, i)
  where v_applied[r.i] and p.payload_id = r.payload_id;

  -- Written only when it changes: a healthy webhook's row is not rewritten by every delivery.
  with verdicts as (
    select p.webhook_id, r.failed, r.at, r.hold_until, r.i
    from unnest(p_payload_ids, p_receiver_failed, p_at, p_hold_until) with ordinality as r(payload_id, failed, at, hold_until, i)
    join asset_webhooks.payloads p on p.payload_id = r.payload_id
    where v_applied[r.i] and r.failed is not null
  ),
  per_webhook as (
    select v.webhook_id, (array_agg(v.failed order by v.at desc, v.i desc))[1] as failed,
           min(v.at) filter (where v.failed) as first_failure, max(v.hold_until) as hold_until
    from verdicts v group by v.webhook_id
  )
  update asset_webhooks.webhooks w
  set failing_since = case when h.failed then coalesce(w.failing_since, h.first_failure) end,
      hold_until = greatest(w.hold_until, h.hold_until)
  from per_webhook h
  where w.webhook_id = h.webhook_id
    and ((h.failed and w.failing_since is null) or (not h.failed and w.failing_since is not null)
         or h.hold_until > coalesce(w.hold_until, '-infinity'));

  return query select o.i::integer, v_applied[o.i] from generate_series(1, cardinality(p_payload_ids)) as o(i);
end $$;
