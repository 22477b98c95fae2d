-- Delivery without graphile-worker jobs: each `run` process's delivery pump
-- (src/delivery/pump.ts) claims due payloads with claim_payloads, sends them
-- concurrently, and writes every outcome with settle_payloads. graphile-worker
-- keeps coalescing, maintenance and their schedule, so a receiver that holds
-- requests open cannot take the job slots they run in.
--
-- The state of a pending payload in its webhook's queue:
--   not dispatched                          waiting in the queue (next_attempt_at, when set, is the
--                                           earliest time it may be sent);
--   dispatched, next_attempt_at set         holds one of its webhook's `concurrency` slots and waits
--                                           for its retry at next_attempt_at;
--   dispatched, next_attempt_at null        in flight: its attempt row (series, attempts) has no
--                                           outcome yet, and names the process that sent it.
-- With concurrency 1 the single slot therefore keeps strict order: the next
-- payload is not claimed before the previous one is delivered or dead-lettered.

-- A webhook's delivery health, shared by every process. failing_since: the
-- first failed attempt (timeout, connection error, 5xx, a retried 4xx) since
-- the last answer that was not a failure; while set, the webhook has at most
-- one attempt in flight. hold_until: a receiver's Retry-After; no payload of
-- the webhook is claimed before it.
alter table asset_webhooks.webhooks
  add column failing_since timestamptz,
  add column hold_until timestamptz;

-- The outcome of the coalescing run of each tick, for readiness: finished_at
-- when it succeeded, error (one line) when its last try failed.
alter table asset_webhooks.ticks
  add column finished_at timestamptz,
  add column error text;

-- Payloads that held a slot for a delivery job become what the pump reads:
-- an attempt in flight keeps its slot with next_attempt_at null (the crash
-- recovery of src/delivery/recover.ts closes it if its process is gone); a
-- payload that waited for a job that has not started an attempt goes back
-- to the queue, keeping its retry time.
update asset_webhooks.payloads p set next_attempt_at = null
where p.status = 'pending' and p.dispatched
  and exists (select 1 from asset_webhooks.attempts a
              where a.payload_id = p.payload_id and a.series = p.series and a.attempt_no = p.attempts and a.outcome is null);
update asset_webhooks.payloads p set dispatched = false
where p.status = 'pending' and p.dispatched and p.next_attempt_at is null
  and not exists (select 1 from asset_webhooks.attempts a
                  where a.payload_id = p.payload_id and a.series = p.series and a.attempt_no = p.attempts and a.outcome is null);

-- Delivery jobs queued by the previous design would never run (no process
-- has a `deliver` task any more): remove them.
do $$
begin
  if to_regclass('graphile_worker.jobs') is not null then
    perform graphile_worker.remove_job(j.key) from graphile_worker.jobs j where j.task_identifier = 'deliver' and j.key is not null;
  end if;
end $$;

drop function asset_webhooks.settle_attempts(bigint[], integer[], integer[], integer[], integer[], text[], text[], text[], text[],
                                            timestamptz[], timestamptz[], boolean[], integer[]);
drop function asset_webhooks.settle_attempt(bigint, integer, integer, integer, integer, text, text, text, text, timestamptz,
                                           timestamptz, boolean, integer);
drop function asset_webhooks.hand_off(text);
drop function asset_webhooks.take_next(text, timestamptz, integer);
drop function asset_webhooks.dispatch(text);
drop function asset_webhooks.enqueue_delivery(bigint, integer, integer, timestamptz);
drop function asset_webhooks.deliver_job_key(bigint, integer, integer);

-- Claims up to p_max payloads that may be sent at p_now, starting their
-- attempts, and returns them (with their bodies) for the caller to send.
--
-- Webhooks take turns: they are visited in id order starting after p_after
-- (the last webhook the caller was given), and each gives at most p_share
-- payloads per call, so a webhook with a long backlog never keeps one with a
-- single payload waiting for more than a call. Per webhook, in flight stays
-- within its concurrency, or within one while failing_since is set; nothing
-- is claimed while hold_until is ahead. Retries that are due go first (they
-- hold their slots already), then the head of the queue while slots are free.
-- A queue payload whose retry time is ahead takes its slot and waits in it.
-- Expired payloads are not claimed: the caller's expiry sweep settles them.
--
-- Safe across processes: a webhook is claimed by one transaction at a time
-- (a try-lock: a webhook being claimed elsewhere is skipped, not waited for),
-- and payloads another transaction holds (a coalescing chunk) are skipped;
-- with concurrency 1 only the head itself may be claimed, so strict order holds.
create function asset_webhooks.claim_payloads(p_now timestamptz, p_max integer, p_share integer, p_after text,
                                              p_expire_after_seconds integer)
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz, body text)
language plpgsql
-- Planned at each call: the payloads table grows and shrinks by orders of magnitude.
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
  w record;
  v_window interval := make_interval(secs => p_expire_after_seconds);
  v_claimed integer := 0;
  v_in_flight integer;
  v_held integer;
  v_take integer;
  v_room integer;
  v_ids bigint[];
  v_head bigint;
  v_n integer;
begin
  for w in
    select k.webhook_id, k.concurrency, k.failing_since is not null as failing
    from asset_webhooks.webhooks k
    where k.enabled and (k.hold_until is null or k.hold_until <= p_now)
    order by k.webhook_id <= coalesce(p_after, ''), k.webhook_id
  loop
    exit when v_claimed >= p_max;
    continue when not pg_try_advisory_xact_lock(hashtextextended('asset_webhooks.claim:' || w.webhook_id, 0));
    select count(*) filter (where p.next_attempt_at is null), count(*) into v_in_flight, v_held
    from asset_webhooks.payloads p
    where p.webhook_id = w.webhook_id and p.status = 'pending' and p.dispatched;
    v_take := least(case when w.failing then 1 else w.concurrency end - v_in_flight, p_share, p_max - v_claimed);
    continue when v_take <= 0;
    v_ids := array(select q.payload_id from asset_webhooks.payloads q
                   where q.webhook_id = w.webhook_id and q.status = 'pending' and q.dispatched
                     and q.next_attempt_at <= p_now and p_now < q.series_started_at + v_window
                   order by q.payload_id limit v_take for update skip locked);
    v_room := least(v_take - cardinality(v_ids), w.concurrency - v_held);
    if v_room > 0 and w.concurrency = 1 then
      select q.payload_id into v_head from asset_webhooks.payloads q
      where q.webhook_id = w.webhook_id and q.status = 'pending' and not q.dispatched
      order by q.payload_id + 0 limit 1;
      v_ids := v_ids || array(select q.payload_id from asset_webhooks.payloads q
                              where q.payload_id = v_head and q.status = 'pending' and not q.dispatched
                              for update skip locked);
    elsif v_room > 0 then
      v_ids := v_ids || array(select q.payload_id from asset_webhooks.payloads q
                              where q.webhook_id = w.webhook_id and q.status = 'pending' and not q.dispatched
                                and p_now < q.series_started_at + v_window
                              order by q.payload_id + 0 limit v_room for update skip locked);
    end if;
    continue when cardinality(v_ids) = 0;
    return query
      with due as (
        select q.payload_id, coalesce(q.next_attempt_at, p_now) <= p_now as due
        from asset_webhooks.payloads q
        where q.payload_id = any(v_ids) and q.status = 'pending' and p_now < q.series_started_at + v_window
      ),
      claimed as (
        update asset_webhooks.payloads p
        set dispatched = true,
            attempts = case when d.due then p.attempts + 1 else p.attempts end,
            last_attempt_at = case when d.due then p_now else p.last_attempt_at end,
            next_attempt_at = case when d.due then null else p.next_attempt_at end
        from due d
        where p.payload_id = d.payload_id and p.payload_id = any(v_ids)
        returning p.payload_id, p.webhook_id, p.series, p.attempts, p.series_started_at, d.due,
                  case when d.due then p.body end as body
      ),
      started as (
        insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at)
        select c.payload_id, c.series, c.attempts, p_now from claimed c where c.due
      )
      select c.payload_id, c.webhook_id, c.series, c.attempts, c.series_started_at, c.body
      from claimed c where c.due order by c.payload_id;
    get diagnostics v_n = row_count;
    v_claimed := v_claimed + v_n;
  end loop;
end $$;

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
-- A retry keeps its slot (dispatched) until its time; a final outcome frees
-- it. p_receiver_failed (null: not the receiver's verdict) and p_hold_until
-- update the webhook's health: the latest verdict of the batch wins (by
-- p_at, then by position), a
-- failure keeps the first failure's time, and hold_until only moves later.
create function asset_webhooks.settle_payloads(
  p_payload_ids bigint[], p_series integer[], p_attempts integer[],
  p_duration_ms integer[], p_status_codes integer[], p_error_classes text[], p_error_messages text[], p_excerpts text[],
  p_outcomes text[], p_at timestamptz[], p_retry_at timestamptz[],
  p_receiver_failed boolean[], p_hold_until timestamptz[]
) returns table (idx integer, applied boolean)
language plpgsql
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
      response_excerpt = r.excerpt, outcome = case when v_applied[r.i] then r.outcome else 'retry' end
  from unnest(p_payload_ids, p_series, p_attempts, p_duration_ms, p_status_codes, p_error_classes, p_error_messages, p_excerpts, p_outcomes)
       with ordinality as r(payload_id, series, attempt, duration_ms, status_code, error_class, error_message, excerpt, outcome, i)
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

-- Attempts in flight whose process is gone: its lease is free (see
-- process_gone) and the attempt started more than p_grace_seconds before
-- p_now; or, for an attempt that names no process (a session named
-- otherwise), started more than p_nameless_after_seconds before. Crash
-- recovery closes them through settle_payloads as interrupted. Call it in a
-- transaction of its own: process_gone holds each lease it finds free until
-- the transaction ends.
create function asset_webhooks.orphaned_attempts(p_now timestamptz, p_grace_seconds integer, p_nameless_after_seconds integer)
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz)
language sql volatile as $$
  select p.payload_id, p.webhook_id, p.series, p.attempts, p.series_started_at
  from asset_webhooks.payloads p
  join asset_webhooks.attempts a on a.payload_id = p.payload_id and a.series = p.series and a.attempt_no = p.attempts
  where p.status = 'pending' and p.dispatched and p.next_attempt_at is null and a.outcome is null
    and ((a.process_id is not null and p_grace_seconds is not null
          and a.started_at < p_now - make_interval(secs => p_grace_seconds)
          and asset_webhooks.process_gone(a.process_id))
      or (a.process_id is null and a.started_at < p_now - make_interval(secs => p_nameless_after_seconds)))
$$;

-- Payloads past their delivery window that are not in flight: waiting in the
-- queue (a disabled webhook, behind a stuck head) or for a retry. The expiry
-- sweep settles them as expired. Read through payloads_expiry and
-- payloads_in_flight.
create function asset_webhooks.expired_payloads(p_now timestamptz, p_expire_after_seconds integer, p_limit integer)
returns table (payload_id bigint, series integer)
language sql stable as $$
  (select p.payload_id, p.series from asset_webhooks.payloads p
   where p.status = 'pending' and not p.dispatched
     and p.series_started_at <= p_now - make_interval(secs => p_expire_after_seconds)
   order by p.series_started_at limit p_limit)
  union all
  (select p.payload_id, p.series from asset_webhooks.payloads p
   where p.status = 'pending' and p.dispatched and p.next_attempt_at is not null
     and p.series_started_at <= p_now - make_interval(secs => p_expire_after_seconds)
   limit p_limit)
$$;
