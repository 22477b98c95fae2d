-- Part of the lifecycle module (sql/functions/README.md).
-- claim_payloads' last step: starts the attempts of the payloads it chose
-- and locked (p_ids, in the order chosen), and returns them with their
-- bodies. One statement for every webhook visited: its cost is per payload,
-- not per webhook. In the order chosen, so the last row names the webhook the
-- next claim's turn starts after. Per webhook (p_webhooks), the first
-- p_sendable of its started attempts may be sent now; the rest are standbys
-- (attempts.sent false). A payload no longer pending, or whose window
-- (p_window from series_started_at) has ended by p_now, is not started. A
-- chosen retry whose time has not come takes its slot and waits in it: it is
-- marked dispatched, not started, and not returned.
create or replace function asset_webhooks.start_attempts(p_ids bigint[], p_webhooks text[], p_sendable integer[],
                                                          p_now timestamptz, p_window interval)
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz,
               body text, standby boolean)
language plpgsql
-- Its plan is made once per session, not at every claim: unlike the queue
-- scans of claim_payloads, whose best index depends on the table as it is
-- now, this statement reaches payloads and attempts only by key (each payload
-- by its own look-up, the update bounded by `payload_id = any(p_ids)`), and
-- sequential scans are off for it, so a plan made on an empty table reads
-- only the chosen rows of a full one (test/delivery/cached-plans.test.ts).
-- The foreign-key checks of the attempts it inserts keep their plans too.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  return query
    with due as (
      -- A join would let the planner scan the whole queue; a look-up each cannot.
      select q.payload_id, coalesce(q.next_attempt_at, p_now) <= p_now as due, o.ord
      from unnest(p_ids) with ordinality as o(payload_id, ord)
      cross join lateral (select q.payload_id, q.status, q.next_attempt_at, q.series_started_at
                          from asset_webhooks.payloads q where q.payload_id = o.payload_id offset 0) q
      where q.status = 'pending' and p_now < q.series_started_at + p_window
    ),
    claimed as (
      update asset_webhooks.payloads p
      set dispatched = true,
          attempts = case when d.due then p.attempts + 1 else p.attempts end,
          last_attempt_at = case when d.due then p_now else p.last_attempt_at end,
          next_attempt_at = case when d.due then null else p.next_attempt_at end
      from due d
      where p.payload_id = any(p_ids) and p.payload_id = d.payload_id
      returning p.payload_id, p.webhook_id, p.series, p.attempts, p.series_started_at, d.due, d.ord,
                case when d.due then
                  case when p.body_of is null then p.body
                       else (select b.body from asset_webhooks.payloads b where b.payload_id = p.body_of) end
                end as body
    ),
    ranked as (
      select c.*, row_number() over (partition by c.webhook_id order by c.ord) > s.sendable as standby
      from claimed c
      join unnest(p_webhooks, p_sendable) as s(webhook_id, sendable) on s.webhook_id = c.webhook_id
      where c.due
    ),
    started as (
      insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at, sent)
      select r.payload_id, r.series, r.attempts, p_now, not r.standby from ranked r
    )
    select r.payload_id, r.webhook_id, r.series, r.attempts, r.series_started_at, r.body, r.standby
    from ranked r order by r.ord;
end $$;
