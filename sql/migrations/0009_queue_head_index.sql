-- 0009: the head of a webhook's queue is read through its own index, whatever
-- the statistics say.
--
-- dispatch, take_next and settle_attempts find a webhook's next waiting
-- payloads with `order by payload_id limit n`. The primary key gives that
-- order too, and when the statistics were taken while one webhook's payloads
-- all waited (a bulk import into a quiet table, or the bench), the planner
-- expects every row to match and reads the primary key from its start,
-- stepping over every payload already delivered. Each slot then cost a read of
-- the whole delivered part of the backlog: n² for a backlog of n. Seen in the
-- plans of settle_attempts: 75,135 rows filtered out in 144 calls to deliver
-- 1,000 payloads.
--
-- The queue index now orders by `payload_id + 0`, an expression only it
-- provides, and the three queries order by the same expression: the primary
-- key can no longer serve them without sorting every row, so the planner
-- reads the queue index from the webhook's head. It replaces
-- payloads_undispatched, which held the same rows.
--
-- Measured on PostgreSQL 15 with the bench's delivery setup (32 in flight,
-- one settle statement in flight, statistics taken with the backlog waiting),
-- payloads/s and database CPU per payload, alternating runs:
--   backlog of 3,000:   1,664-1,989/s, 323-353 us  ->  1,714-2,184/s, 277-313 us
--   backlog of 10,000:  1,513-1,535/s, 461-465 us  ->  2,162-2,245/s, 260-274 us
--
-- The functions are otherwise unchanged: only `+ 0` is new in their queries.
create index payloads_queue on asset_webhooks.payloads (webhook_id, (payload_id + 0))
  where status = 'pending' and not dispatched;
drop index asset_webhooks.payloads_undispatched;

create or replace function asset_webhooks.dispatch(p_webhook_id text) returns integer
language plpgsql as $$
declare
  v_slots integer;
  v_started integer := 0;
  r record;
begin
  perform pg_advisory_xact_lock(hashtextextended('asset_webhooks.dispatch:' || p_webhook_id, 0));
  select w.concurrency - (select count(*) from asset_webhooks.payloads p
                          where p.webhook_id = p_webhook_id and p.status = 'pending' and p.dispatched)
    into v_slots
  from asset_webhooks.webhooks w
  where w.webhook_id = p_webhook_id and w.enabled;
  if v_slots is null or v_slots <= 0 then
    return 0;
  end if;
  for r in
    update asset_webhooks.payloads p set dispatched = true
    where p.payload_id in (select q.payload_id from asset_webhooks.payloads q
                           where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
                           order by q.payload_id + 0 limit v_slots)
    returning p.payload_id, p.series, p.attempts, p.next_attempt_at
  loop
    perform asset_webhooks.enqueue_delivery(r.payload_id, r.series, r.attempts + 1, coalesce(r.next_attempt_at, now()));
    v_started := v_started + 1;
  end loop;
  return v_started;
end $$;

create or replace function asset_webhooks.take_next(p_webhook_id text, p_start_at timestamptz default null,
                                          p_expire_after_seconds integer default null)
returns asset_webhooks.payloads
language plpgsql as $$
declare
  v_limit integer;
  v_in_flight integer;
  v_next bigint;
  v_next_attempt_at timestamptz;
  v_series_started_at timestamptz;
  v_start boolean;
  r asset_webhooks.payloads;
begin
  select w.concurrency into v_limit from asset_webhooks.webhooks w where w.webhook_id = p_webhook_id and w.enabled;
  if v_limit is null then
    return null;
  end if;
  select count(*) into v_in_flight from asset_webhooks.payloads p
  where p.webhook_id = p_webhook_id and p.status = 'pending' and p.dispatched;
  if v_in_flight >= v_limit then
    return null;
  end if;
  if v_limit = 1 then
    select q.payload_id, q.next_attempt_at, q.series_started_at into v_next, v_next_attempt_at, v_series_started_at
    from asset_webhooks.payloads q
    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
    order by q.payload_id + 0 limit 1 for update;
  else
    select q.payload_id, q.next_attempt_at, q.series_started_at into v_next, v_next_attempt_at, v_series_started_at
    from asset_webhooks.payloads q
    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
    order by q.payload_id + 0 limit 1 for update skip locked;
  end if;
  if v_next is null then
    return null;
  end if;
  v_start := p_start_at is not null
             and coalesce(v_next_attempt_at, p_start_at) <= p_start_at
             and p_start_at < v_series_started_at + make_interval(secs => p_expire_after_seconds);
  update asset_webhooks.payloads p
  set dispatched = true,
      attempts = case when v_start then p.attempts + 1 else p.attempts end,
      last_attempt_at = case when v_start then p_start_at else p.last_attempt_at end
  where p.payload_id = v_next and not p.dispatched
  returning p.* into r;
  return r;
end $$;

create or replace function asset_webhooks.settle_attempts(
  p_payload_ids bigint[], p_series integer[], p_attempts integer[],
  p_duration_ms integer[], p_status_codes integer[], p_error_classes text[], p_error_messages text[], p_excerpts text[],
  p_outcomes text[], p_at timestamptz[], p_retry_at timestamptz[],
  p_chain boolean[], p_expire_after_seconds integer[]
) returns table (
  idx integer, applied boolean, next_payload_id bigint, next_webhook_id text, next_series integer, next_attempt integer,
  next_series_started_at timestamptz, next_body text
)
language plpgsql
-- Its statements are planned once per connection, not on every call: custom
-- plans for the array parameters cost more to make than they saved (above).
set plan_cache_mode = force_generic_plan
-- The webhook's in-flight count and the head of its waiting payloads are read
-- through their partial indexes even when the statistics say the table is empty.
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_set boolean[];
  v_current boolean[];
  v_answered boolean[];
  v_settled_idx integer[];
  v_settled_webhook text[];
  v_webhook text;
  v_slots integer[];
  v_limit integer;
  v_in_flight integer;
  v_take integer;
  v_next bigint[];
  v_row record;
  i integer;
begin
  perform 1 from asset_webhooks.payloads p where p.payload_id = any(p_payload_ids) order by p.payload_id for update;

  -- Read after the lock: which results are settled as a set, and which still
  -- apply (the payload's latest attempt of its current series, still pending).
  select array_agg(f.in_set order by f.i), array_agg(f.current order by f.i)
  into v_set, v_current
  from (
    select o.i,
           o.outcome <> 'retry' and o.chain and count(*) over (partition by o.payload_id) = 1 as in_set,
           coalesce(p.series = o.series and p.attempts = o.attempt and p.status = 'pending', false) as current
    from unnest(p_payload_ids, p_series, p_attempts, p_outcomes, p_chain)
         with ordinality as o(payload_id, series, attempt, outcome, chain, i)
    left join asset_webhooks.payloads p on p.payload_id = o.payload_id and p.payload_id = any(p_payload_ids)
  ) f;
  v_answered := array_fill(false, array[cardinality(p_payload_ids)]);

  update asset_webhooks.attempts a
  set duration_ms = r.duration_ms, status_code = r.status_code, error_class = r.error_class, error_message = r.error_message,
      response_excerpt = r.excerpt, outcome = case when v_current[r.i] then r.outcome else 'retry' end
  from unnest(p_payload_ids, p_series, p_attempts, p_duration_ms, p_status_codes, p_error_classes, p_error_messages, p_excerpts, p_outcomes)
       with ordinality as r(payload_id, series, attempt, duration_ms, status_code, error_class, error_message, excerpt, outcome, i)
  where v_set[r.i] and a.payload_id = r.payload_id and a.payload_id = any(p_payload_ids) and a.series = r.series and a.attempt_no = r.attempt;

  with settled as (
    update asset_webhooks.payloads p
    set last_status_code = r.status_code,
        last_error = case when r.error_class is null then null else r.error_class || ': ' || coalesce(r.error_message, '') end,
        status = case r.outcome when 'delivered' then 'delivered' else 'dead_lettered' end,
        delivered_at = case when r.outcome = 'delivered' then r.at end,
        dead_letter_reason = case when r.outcome <> 'delivered' then r.outcome end,
        dead_lettered_at = case when r.outcome <> 'delivered' then r.at end,
        dispatched = false,
        next_attempt_at = null
    from unnest(p_payload_ids, p_status_codes, p_error_classes, p_error_messages, p_outcomes, p_at)
         with ordinality as r(payload_id, status_code, error_class, error_message, outcome, at, i)
    where v_set[r.i] and v_current[r.i] and p.payload_id = r.payload_id and p.payload_id = any(p_payload_ids)
    returning r.i, p.webhook_id, p.payload_id
  )
  -- In payload_id order: the order in which a webhook's results take its next payloads.
  select array_agg(s.i order by s.payload_id), array_agg(s.webhook_id order by s.payload_id)
  into v_settled_idx, v_settled_webhook
  from settled s;

  -- Each webhook's freed slots go to its next payloads.
  for v_webhook in select distinct w from unnest(v_settled_webhook) as w order by w loop
    v_slots := array(select s.i from unnest(v_settled_idx, v_settled_webhook) with ordinality as s(i, w, k)
                     where s.w = v_webhook order by s.k);
    select w.concurrency into v_limit from asset_webhooks.webhooks w where w.webhook_id = v_webhook and w.enabled;
    continue when v_limit is null;
    select count(*) into v_in_flight from asset_webhooks.payloads p
    where p.webhook_id = v_webhook and p.status = 'pending' and p.dispatched;
    v_take := least(cardinality(v_slots), v_limit - v_in_flight);
    continue when v_take <= 0;
    if v_limit = 1 then
      select array_agg(q.payload_id order by q.payload_id) into v_next from (
        select q.payload_id from asset_webhooks.payloads q
        where q.webhook_id = v_webhook and q.status = 'pending' and not q.dispatched
        order by q.payload_id + 0 limit v_take for update) q;
    else
      select array_agg(q.payload_id order by q.payload_id) into v_next from (
        select q.payload_id from asset_webhooks.payloads q
        where q.webhook_id = v_webhook and q.status = 'pending' and not q.dispatched
        order by q.payload_id + 0 limit v_take for update skip locked) q;
    end if;
    continue when v_next is null;
    for v_row in
      with pairs as (
        select n.payload_id, s.i, p_at[s.i] as at,
               coalesce(q.next_attempt_at, p_at[s.i]) <= p_at[s.i]
               and p_at[s.i] < q.series_started_at + make_interval(secs => p_expire_after_seconds[s.i]) as start
        from unnest(v_next) with ordinality as n(payload_id, k)
        join unnest(v_slots) with ordinality as s(i, k) on s.k = n.k
        join asset_webhooks.payloads q on q.payload_id = n.payload_id and q.payload_id = any(v_next)
      ),
      taken as (
        update asset_webhooks.payloads p
        set dispatched = true,
            attempts = case when t.start then p.attempts + 1 else p.attempts end,
            last_attempt_at = case when t.start then t.at else p.last_attempt_at end
        from pairs t
        where p.payload_id = t.payload_id and p.payload_id = any(v_next) and not p.dispatched
        returning t.i, t.start, t.at, p.payload_id, p.webhook_id, p.series, p.attempts, p.series_started_at, p.next_attempt_at,
                  case when t.start then p.body end as body
      ),
      started as (
        insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at)
        select t.payload_id, t.series, t.attempts, t.at from taken t where t.start
      )
      select * from taken
    loop
      if v_row.start then
        v_answered[v_row.i] := true;
        idx := v_row.i; applied := true; next_payload_id := v_row.payload_id; next_webhook_id := v_row.webhook_id; next_series := v_row.series;
        next_attempt := v_row.attempts; next_series_started_at := v_row.series_started_at; next_body := v_row.body;
        return next;
      else
        perform asset_webhooks.enqueue_delivery(v_row.payload_id, v_row.series, v_row.attempts + 1, coalesce(v_row.next_attempt_at, now()));
      end if;
    end loop;
  end loop;

  return query
    select o.i::integer, v_current[o.i], null::bigint, null::text, null::integer, null::integer, null::timestamptz, null::text
    from generate_series(1, cardinality(p_payload_ids)) as o(i)
    where v_set[o.i] and not v_answered[o.i];

  -- The rest, one at a time as before.
  for i in select o.i from unnest(p_payload_ids) with ordinality as o(payload_id, i)
           where not v_set[o.i] order by o.payload_id, o.i loop
    return query
      select i, s.applied, s.next_payload_id, s.next_webhook_id, s.next_series, s.next_attempt, s.next_series_started_at, s.next_body
      from asset_webhooks.settle_attempt(
        p_payload_ids[i], p_series[i], p_attempts[i], p_duration_ms[i], p_status_codes[i], p_error_classes[i], p_error_messages[i],
        p_excerpts[i], p_outcomes[i], p_at[i], p_retry_at[i], p_chain[i], p_expire_after_seconds[i]) as s;
  end loop;
end $$;
