-- Part of the lifecycle module (sql/functions/README.md).
-- claim_payloads' last step: starts the attempts of the payloads it chose
-- and locked (p_ids, in the order chosen), and returns them with their
-- bodies. One statement for every webhook visited: its cost is per payload,
-- not per webhook. In the order chosen, so the last row names the webhook the
-- next claim's turn starts after. Per webhook (p_webhooks), the first
-- p_sendable of its started attempts may be sent now; the rest are standbys
-- (in_flight.sent false). A payload no longer pending, whose window (p_window
-- from series_started_at) has ended by p_now, that holds a slot in flight,
-- or whose retry is not yet due, is not started.
--
-- The payload's row is not written: its attempt is its in_flight row,
-- inserted for a payload from the queue, or, for a retry that held its slot,
-- that row updated in place (a HOT update: nothing it indexes changes).
create or replace function asset_webhooks.start_attempts(p_ids bigint[], p_webhooks text[], p_sendable integer[],
                                                          p_now timestamptz, p_window interval)
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz,
               body text, standby boolean)
language plpgsql
-- Its plan is made once per session, not at every claim: unlike the queue
-- scans of claim_payloads, whose best index depends on the table as it is
-- now, this statement reaches payloads and in_flight only by key (each
-- payload by its own look-up), and sequential scans are off for it, so a plan
-- made on an empty table reads only the chosen rows of a full one
-- (test/delivery/cached-plans.test.ts).
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  -- Read once into a variable: a call in the statement, even in a subquery of
  -- its own, is flattened into the insert and made once per row.
  v_process text := asset_webhooks.process_of_session();
begin
  return query
    with chosen as (
      -- A join would let the planner scan the whole queue; a look-up each cannot.
      select q.payload_id, q.webhook_id, q.series, q.attempts + 1 as attempt, q.series_started_at, q.body, q.body_of,
             o.ord
      from unnest(p_ids) with ordinality as o(payload_id, ord)
      cross join lateral (select q.payload_id, q.webhook_id, q.status, q.series, q.attempts, q.series_started_at,
                                 q.body, q.body_of
                          from asset_webhooks.payloads q where q.payload_id = o.payload_id offset 0) q
      left join lateral (select true as held, f.next_attempt_at from asset_webhooks.in_flight f
                         where f.payload_id = o.payload_id offset 0) f on true
      where q.status = 'pending' and p_now < q.series_started_at + p_window
        and (f.held is null or f.next_attempt_at <= p_now)
    ),
    ranked as (
      select c.*, row_number() over (partition by c.webhook_id order by c.ord) > s.sendable as standby
      from chosen c
      join unnest(p_webhooks, p_sendable) as s(webhook_id, sendable) on s.webhook_id = c.webhook_id
    ),
    started as (
      -- The process named once for the call, not by the column's default for each row.
      insert into asset_webhooks.in_flight as f (payload_id, webhook_id, series, attempt_no, started_at, sent, process_id)
      select r.payload_id, r.webhook_id, r.series, r.attempt, p_now, not r.standby, v_process
      from ranked r
      on conflict (payload_id) do update
      set series = excluded.series, attempt_no = excluded.attempt_no, started_at = excluded.started_at,
          sent = excluded.sent, process_id = excluded.process_id, next_attempt_at = null
      where f.next_attempt_at is not null
      returning f.payload_id
    )
    select r.payload_id, r.webhook_id, r.series, r.attempt, r.series_started_at,
           case when r.body_of is null then r.body
                else (select b.body from asset_webhooks.payloads b where b.payload_id = r.body_of) end,
           r.standby
    from ranked r join started s on s.payload_id = r.payload_id
    order by r.ord;
end $$;
