-- 0008: every statement of settle_attempts names the payloads it reads by
-- their ids (`payload_id = any(...)`), so it scans only those rows whatever
-- plan the table's statistics lead to.
--
-- Its plans are made once per connection (0007). With the joins on unnest()
-- alone, the planner could pick a plan that reads the whole payloads table
-- through its primary key (seen with statistics taken when the table was
-- small). That costs little while dead rows are removed, but while a long
-- transaction holds them (a pg_dump, a long report), every delivered payload
-- stays in the table and each settle read all of them.
--
-- Measured on PostgreSQL 15, one repeatable-read transaction held open,
-- 32 in flight, payloads/s and database CPU per payload:
--   backlog of 3,000:  787/s, 1,347 us  ->  1,414/s, 360 us
--   backlog of 8,000:  471/s, 3,191 us  ->  1,416/s, 694 us
-- Without a long transaction, no measurable difference (2,760-3,305/s before,
-- 2,778-2,897/s after, alternating in one process).
--
-- Those figures are for the `= any(...)` conditions alone. `enable_seqscan =
-- off` came after: with statistics taken on an empty table, the webhook's
-- in-flight count and the head of its waiting payloads were read by scanning
-- the table (6,004 rows read to settle one result among 2,000 payloads; now a
-- few dozen, test/delivery/settle-batch.test.ts). Its effect under a long
-- transaction was not measured separately.
--
-- The function is otherwise 0007's: only the five `= any(...)` conditions and
-- the `enable_seqscan` setting are new.
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
        order by q.payload_id limit v_take for update) q;
    else
      select array_agg(q.payload_id order by q.payload_id) into v_next from (
        select q.payload_id from asset_webhooks.payloads q
        where q.webhook_id = v_webhook and q.status = 'pending' and not q.dispatched
        order by q.payload_id limit v_take for update skip locked) q;
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
