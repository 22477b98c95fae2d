-- Part of the lifecycle module (sql/functions/README.md), its core: every attempt's result
-- (crash recovery's interrupted included), an expiry, a removed webhook's
-- dead letters, an operator's redelivery (moved to another webhook or not),
-- a replay of a delivered payload (the same, from `delivered`), a claimed attempt given back, a resumed webhook's pause shift. One answer
-- per transition, in order.
--
-- A transition that does not apply to the payload's state as it is when the
-- statement locks it is refused: it answers applied = false with the reason
-- (transition_refusal, or no_such_payload, series_moved_on,
-- named_earlier_in_batch), changes nothing of the payload, and never fails
-- the others: an error means the database refused the statement. A payload
-- named twice in one batch is changed by its first entry only. An attempt's
-- result is recorded whether or not it applies (an operator redelivered the
-- payload, another process closed the attempt first): refused, it counts as
-- a plain failed try (outcome 'retry'). A given_back attempt's unfinished row
-- goes whether or not the payload still holds it: a request never made is no
-- attempt.
--
-- Time is asset_webhooks.now(), read once per statement (a redelivery's
-- requested_at and a pause shift's end included): the policy gives a
-- retry as a delay (retry_in), and it is due at now() + retry_in, never after
-- the end of the series' window (series_started_at + window_seconds), where
-- the expiry sweep ends it; a retry decided at or after that end is written
-- as `expired` (its attempt too), and its answer says so. A Retry-After hold
-- (hold_in) counts from now() the same way and ends by the window's end.
--
-- A retry keeps its slot (its in_flight row, next_attempt_at set) until its
-- time; a final outcome frees it (the row goes). Every applied result writes
-- the payload's attempts, last_attempt_at and last status; the attempt goes
-- to attempt_log. receiver_failed and hold_until of the applied attempt results update
-- the webhook's health: the latest verdict of the batch wins (by `at`, then
-- by position), a failure keeps the first failure's time, and hold_until only
-- moves later. A redelivery starts a new series (series_started_at now, no
-- attempts) and records it in asset_webhooks.redeliveries; a replay does the
-- same to a delivered payload (its delivered_at goes with the series that
-- delivered it: the attempts keep it) and records its replay_id. A pause shift
-- moves series_started_at forward by the time the payload spent paused
-- (a payload created during the pause starts its window now).
--
-- An attempt result `suspended` (a 410 Gone under retry.disableOnGone) puts
-- its payload back in its queue, waiting, and suspends its webhook: gone_since
-- and paused_since are set (an earlier suspension or pause keeps its start),
-- so nothing of the webhook is claimed and nothing expires until the resume
-- (resume_gone_webhook, or a new url: resume_webhooks). It is never `expired`.
create or replace function asset_webhooks.transition_payloads(p_transitions asset_webhooks.payload_transition[])
returns setof asset_webhooks.transition_answer
language plpgsql
-- Plans are made once per session (and again when the tables' statistics
-- change), not at every call: planning cost more than running this
-- function's statements. That is safe only because no plan can read more
-- than the batch's rows, however small the tables were when it was made:
-- every statement reaches payloads and attempts through their primary keys,
-- bounded by `payload_id = any(v_ids)`, and sequential scans are off, so a
-- plan made while payloads was empty cannot scan the history it grows
-- (test/delivery/cached-plans.test.ts).
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set search_path = pg_catalog, pg_temp
as $$
declare
  v_now timestamptz := asset_webhooks.now();
  -- The payloads the batch names: every statement below reads only these.
  v_ids bigint[];
  v_refused text[];
  -- Per transition: the outcome written (an attempt result's, a retry past its window's end `expired`).
  v_outcome text[];
  -- Per transition: the start of its payload's slot, read with the refusals (null without one).
  v_slot_started timestamptz[];
  -- The kinds in the batch: a statement for a kind not in it is not run, so
  -- it is not planned either (each is planned at every call it runs).
  v_kinds text[];
  v_unknown text;
begin
  if coalesce(cardinality(p_transitions), 0) = 0 then
    return;
  end if;
  select array_agg(distinct coalesce(t.kind, 'null')) into v_kinds from unnest(p_transitions) t;
  if not v_kinds <@ array['attempt_result', 'interrupted', 'expiry', 'webhook_removed', 'redelivery', 'replay',
                          'given_back', 'pause_shift'] then
    select k into v_unknown from unnest(v_kinds) k
    where k not in ('attempt_result', 'interrupted', 'expiry', 'webhook_removed', 'redelivery', 'replay', 'given_back',
                    'pause_shift')
    limit 1;
    raise exception 'asset_webhooks.transition_payloads: unknown transition kind %', v_unknown using errcode = '22023';
  end if;

  v_ids := array(select distinct t.payload_id from unnest(p_transitions) t where t.payload_id is not null);

  -- In payload order, so that concurrent batches never wait on each other in a cycle.
  perform 1 from asset_webhooks.payloads p
  where p.payload_id = any(v_ids)
  order by p.payload_id for update of p;

  -- Each distinct case (kind, state, whether the attempt is current) is asked
  -- of payload_state and transition_refusal once: a batch of results is
  -- almost always one case, and a call of either costs more than the row it
  -- decides.
  with u as materialized (
    select t.ordinality as i, t.kind, t.series, t.outcome, t.window_seconds,
           row_number() over (partition by t.payload_id order by t.ordinality) = 1 as first,
           p.payload_id is not null as found, p.series as payload_series, p.series_started_at, p.status,
           f.payload_id is not null as has_slot, f.next_attempt_at, f.started_at as slot_started_at,
           coalesce(f.series = p.series and f.attempt_no = t.attempt and f.next_attempt_at is null, false) as current
    from unnest(p_transitions) with ordinality t
    left join asset_webhooks.payloads p on p.payload_id = t.payload_id and p.payload_id = any(v_ids)
    left join asset_webhooks.in_flight f on f.payload_id = p.payload_id and f.payload_id = any(v_ids)
  ),
  cases as (
    select c.kind, c.status, c.has_slot, c.held, c.current,
           asset_webhooks.transition_refusal(c.kind, asset_webhooks.payload_state(c.status, c.has_slot, c.next_attempt_at),
                                             c.current) as refusal
    from (select u.kind, u.status, u.has_slot, u.next_attempt_at is not null as held, u.current,
                 min(u.next_attempt_at) as next_attempt_at
          from u where u.found and u.first
          group by u.kind, u.status, u.has_slot, u.next_attempt_at is not null, u.current) c
  )
  select array_agg(case
           when not u.first then 'named_earlier_in_batch'
           when not u.found then 'no_such_payload'
           when u.series is not null and u.series <> u.payload_series then 'series_moved_on'
           else c.refusal
         end order by u.i),
         array_agg(case
           when u.kind in ('attempt_result', 'interrupted') and u.outcome = 'retry' and u.window_seconds is not null
                and u.found
                and v_now >= u.series_started_at + make_interval(secs => u.window_seconds) then 'expired'
           else u.outcome
         end order by u.i),
         array_agg(u.slot_started_at order by u.i)
  into v_refused, v_outcome, v_slot_started
  from u
  left join cases c on u.found and u.first and c.kind = u.kind and c.status = u.status and c.has_slot = u.has_slot
    and c.held = (u.next_attempt_at is not null) and c.current = u.current;

  -- Attempt results: recorded applied or not, one row of the log per
  -- attempt, from its first entry, its start and process from its slot while
  -- its payload still holds it in flight. The first result of an attempt left
  -- open in the log (its payload lost its slot first) closes it; one the log
  -- holds closed already (crash recovery's) stays as it is.
  if v_kinds && array['attempt_result', 'interrupted'] then
    insert into asset_webhooks.attempt_log as a (payload_id, series, attempt_no, started_at, duration_ms, status_code,
                                                 error_class, error_message, response_excerpt, outcome, process_id)
    select r.payload_id, r.series, r.attempt, coalesce(r.started_at, f.started_at, v_now), r.duration_ms, r.status_code,
           r.error_class, r.error_message, r.response_excerpt,
           case when v_refused[r.i] is null then v_outcome[r.i] else 'retry' end, f.process_id
    from (select distinct on (t.payload_id, t.series, t.attempt) t.*, t.ordinality as i
          from unnest(p_transitions) with ordinality t
          where t.kind in ('attempt_result', 'interrupted')
          order by t.payload_id, t.series, t.attempt, t.ordinality) r
    left join asset_webhooks.in_flight f
      on f.payload_id = any(v_ids) and f.payload_id = r.payload_id and f.series = r.series and f.attempt_no = r.attempt
         and f.next_attempt_at is null
    on conflict (payload_id, series, attempt_no) do update
    set duration_ms = excluded.duration_ms, status_code = excluded.status_code, error_class = excluded.error_class,
        error_message = excluded.error_message, response_excerpt = excluded.response_excerpt,
        outcome = excluded.outcome
    where a.outcome is null;
  end if;

  -- Attempt results and expiries that apply: the payload's next state.
  if v_kinds && array['attempt_result', 'interrupted', 'expiry'] then
    update asset_webhooks.payloads p
    set last_status_code = case when r.kind = 'expiry' then p.last_status_code else r.status_code end,
        last_error = case when r.kind = 'expiry' then p.last_error
                          when r.error_class is null then null
                          else r.error_class || ': ' || coalesce(r.error_message, '') end,
        status = case r.outcome when 'delivered' then 'delivered' when 'retry' then 'pending' when 'suspended' then 'pending'
                   else 'dead_lettered' end,
        delivered_at = case when r.outcome = 'delivered' then r.at end,
        dead_letter_reason = case when r.outcome not in ('delivered', 'retry', 'suspended') then r.outcome end,
        dead_lettered_at = case when r.outcome not in ('delivered', 'retry', 'suspended') then r.at end,
        attempts = case when r.kind = 'expiry' then p.attempts else r.attempt end,
        last_attempt_at = case when r.kind = 'expiry' then p.last_attempt_at
                               else coalesce(r.started_at, r.attempt_started_at, p.last_attempt_at) end
    from (select t.kind, t.payload_id, t.attempt, t.started_at, t.status_code, t.error_class, t.error_message,
                 t.ordinality as i,
                 case when t.kind = 'expiry' then 'expired' else v_outcome[t.ordinality] end as outcome,
                 coalesce(t.at, v_now) as at, v_slot_started[t.ordinality] as attempt_started_at
          from unnest(p_transitions) with ordinality t
          where t.kind in ('attempt_result', 'interrupted', 'expiry')) r
    where v_refused[r.i] is null and p.payload_id = any(v_ids) and p.payload_id = r.payload_id;
    -- The slot: a retry holds it until its time (a HOT update), a final outcome or a suspension frees it.
    if 'retry' = any(v_outcome) then
      update asset_webhooks.in_flight f
      set next_attempt_at = least(v_now + greatest(coalesce(t.retry_in, interval '0'), interval '0'),
                                  p.series_started_at + make_interval(secs => t.window_seconds))
      from unnest(p_transitions) with ordinality t
      join asset_webhooks.payloads p on p.payload_id = t.payload_id and p.payload_id = any(v_ids)
      where v_refused[t.ordinality] is null and t.kind in ('attempt_result', 'interrupted')
        and v_outcome[t.ordinality] = 'retry' and f.payload_id = any(v_ids) and f.payload_id = t.payload_id;
    end if;
    delete from asset_webhooks.in_flight f
    using unnest(p_transitions) with ordinality t
    where v_refused[t.ordinality] is null and t.kind in ('attempt_result', 'interrupted', 'expiry')
      and (t.kind = 'expiry' or v_outcome[t.ordinality] <> 'retry')
      and f.payload_id = any(v_ids) and f.payload_id = t.payload_id;
  end if;

  -- Written only when it changes: a healthy webhook's row is not rewritten by every delivery.
  if v_kinds && array['attempt_result', 'interrupted'] then
    with verdicts as (
      select p.webhook_id, t.receiver_failed as failed, coalesce(t.at, v_now) as at,
             case when v_outcome[t.ordinality] = 'retry' and t.hold_in is not null then
               least(v_now + t.hold_in, p.series_started_at + make_interval(secs => t.window_seconds)) end as hold_until,
             t.ordinality as i
      from unnest(p_transitions) with ordinality t
      join asset_webhooks.payloads p on p.payload_id = t.payload_id and p.payload_id = any(v_ids)
      where v_refused[t.ordinality] is null and t.kind in ('attempt_result', 'interrupted')
        and t.receiver_failed is not null
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
  end if;

  -- A 410 under retry.disableOnGone: the webhook is suspended from the first
  -- one (by `at`, then by position); a suspension under way keeps its start.
  -- Only a batch that holds one reads for it: every delivery result passes here.
  if 'suspended' = any(v_outcome) then
    with gone as (
      select distinct on (p.webhook_id) p.webhook_id, p.payload_id, coalesce(t.at, v_now) as at
      from unnest(p_transitions) with ordinality t
      join asset_webhooks.payloads p on p.payload_id = t.payload_id and p.payload_id = any(v_ids)
      where v_refused[t.ordinality] is null and t.kind = 'attempt_result' and v_outcome[t.ordinality] = 'suspended'
      order by p.webhook_id, coalesce(t.at, v_now), t.ordinality
    )
    update asset_webhooks.webhooks w
    set gone_since = g.at, gone_payload_id = g.payload_id, paused_since = coalesce(w.paused_since, g.at),
        updated_at = v_now
    from gone g
    where w.webhook_id = g.webhook_id and w.gone_since is null;
  end if;

  if v_kinds && array['webhook_removed'] then
    update asset_webhooks.payloads p
    set status = 'dead_lettered', dead_letter_reason = 'webhook_removed',
        dead_lettered_at = coalesce(t.at, v_now)
    from unnest(p_transitions) with ordinality t
    where v_refused[t.ordinality] is null and t.kind = 'webhook_removed' and p.payload_id = any(v_ids)
      and p.payload_id = t.payload_id;
    -- An attempt in flight stays in the log, open, for its result to close
    -- (a standby never sent was no attempt); the slot goes.
    with freed as (
      delete from asset_webhooks.in_flight f
      using unnest(p_transitions) with ordinality t
      where v_refused[t.ordinality] is null and t.kind = 'webhook_removed' and f.payload_id = any(v_ids)
        and f.payload_id = t.payload_id
      returning f.*
    )
    insert into asset_webhooks.attempt_log (payload_id, series, attempt_no, started_at, process_id)
    select f.payload_id, f.series, f.attempt_no, f.started_at, f.process_id from freed f
    where f.next_attempt_at is null and f.sent
    on conflict (payload_id, series, attempt_no) do nothing;
  end if;

  if v_kinds && array['redelivery', 'replay'] then
    with chosen as (
      select p.payload_id, coalesce(t.to_webhook_id, p.webhook_id) as webhook_id,
             case when t.to_webhook_id <> p.webhook_id then p.webhook_id end as moved_from,
             p.dead_letter_reason as previous_reason, coalesce(t.requested_by, current_user) as requested_by,
             case when t.kind = 'replay' then t.replay_id end as replay_id
      from unnest(p_transitions) with ordinality t
      -- One primary-key probe per transition: joined on `any(v_ids)` as well, the
      -- generic plan probed the whole batch for each transition (n squared rows).
      cross join lateral (select p.payload_id, p.webhook_id, p.dead_letter_reason from asset_webhooks.payloads p
                          where p.payload_id = t.payload_id) p
      where v_refused[t.ordinality] is null and t.kind in ('redelivery', 'replay')
    ),
    started as (
      update asset_webhooks.payloads p
      set webhook_id = c.webhook_id, status = 'pending', series = p.series + 1, series_started_at = v_now,
          attempts = 0, dead_letter_reason = null, dead_lettered_at = null,
          delivered_at = null
      from chosen c
      where p.payload_id = any(v_ids) and p.payload_id = c.payload_id
      returning p.payload_id, p.series, c.requested_by, c.previous_reason, c.moved_from, c.replay_id
    )
    insert into asset_webhooks.redeliveries (payload_id, series, requested_by, previous_reason, moved_from, requested_at,
                                             replay_id)
    select s.payload_id, s.series, s.requested_by, s.previous_reason, s.moved_from, v_now, s.replay_id from started s;
  end if;

  if v_kinds && array['given_back'] then
    -- The payload's row was not written by its claim: freeing the slot puts it back in its queue.
    delete from asset_webhooks.in_flight f
    using unnest(p_transitions) t
    where t.kind = 'given_back' and f.payload_id = any(v_ids) and f.payload_id = t.payload_id and f.series = t.series
      and f.attempt_no = t.attempt and f.next_attempt_at is null;
  end if;

  if v_kinds && array['pause_shift'] then
    update asset_webhooks.payloads p
    set series_started_at = p.series_started_at + (v_now - greatest(p.series_started_at, t.paused_since))
    from unnest(p_transitions) with ordinality t
    where v_refused[t.ordinality] is null and t.kind = 'pause_shift' and p.payload_id = any(v_ids)
      and p.payload_id = t.payload_id and p.series_started_at < v_now;
  end if;

  return query
    select o.i::integer, v_refused[o.i] is null, v_refused[o.i],
           case when v_refused[o.i] is null then v_outcome[o.i] end
    from generate_series(1, cardinality(p_transitions)) as o(i);
end $$;
