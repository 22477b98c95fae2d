-- Part of the lifecycle module (sql/functions/README.md).
-- Claims up to p_max payloads that may be sent now (asset_webhooks.now()), starting their
-- attempts, and returns them (with their bodies) for the caller to send.
--
-- Webhooks take turns: they are visited in id order starting after p_after
-- (the last webhook the caller was given), and each gives at most p_share
-- payloads per call, so a webhook with a long backlog never keeps one with a
-- single payload waiting for more than a call. Per webhook, in flight stays
-- within its concurrency, or within one while failing_since is set; nothing
-- is claimed while hold_until is ahead. Retries that are due go first (they
-- hold their slots already), then the head of the queue while slots are free.
-- Expired payloads are not claimed: the caller's expiry sweep settles them.
--
-- Standby: for the webhooks named in p_standby_for (those the caller has
-- requests open to), up to p_standby payloads more than the concurrency are
-- claimed and returned with standby = true: their attempts are started, not
-- yet sent (in_flight.sent false), and the caller sends one only when one of
-- its own requests to that webhook has ended and that request's result is not
-- yet written, and says so in its next complete_attempts (or undoes it with
-- a given_back transition). Requests are the rows sent (in_flight.sent):
-- a row claimed while the webhook has its concurrency of them is a standby,
-- and a standby is sent only in place of a request that has ended but still
-- counts until its result is written (that statement records the standby
-- sent), so a receiver never sees more than its concurrency at once, and
-- standbys held never keep a claim from filling it. No
-- standby is claimed with concurrency 1 (strict order: the next payload waits
-- for the previous one's delivery) or while failing_since is set.
--
-- Rate limit (rateLimit, kept in asset_webhooks.webhook_queues): a webhook
-- whose queue row has a rate takes at most the whole tokens its bucket holds
-- now (filled at rate_current per second since rate_refilled_at, up to
-- rate_burst), claims no standby, and pays one token per payload claimed, in
-- this statement, under its claim lock: all processes together stay within
-- the rate. A webhook without a rate reads no row of webhook_queues. A
-- webhook held by its rate is passed over like a full one, and the others
-- are visited as usual. When one was held, a last row with payload_id null
-- says in wake_in_ms when the earliest of them has its next token, so that
-- the caller claims again then rather than at its next poll. The queue row is
-- taken with skip locked (a completer writing its adaptive rate holds it a
-- moment): a claim never waits on it, and such a webhook waits for the next
-- claim.
--
-- Safe across processes: a webhook is claimed by one transaction at a time
-- (a try-lock of its row: a webhook being claimed elsewhere, or whose row
-- another transaction is writing, is skipped, not waited for),
-- and payloads another transaction holds (a coalescing chunk) are skipped;
-- with concurrency 1 only the head itself may be claimed, so strict order holds.
create or replace function asset_webhooks.claim_payloads(p_max integer, p_share integer, p_after text,
                                              p_expire_after_seconds integer,
                                              p_standby integer default 0, p_standby_for text[] default '{}')
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz,
               body text, standby boolean, wake_in_ms integer)
language plpgsql
-- Its plans are kept for the session, like any function's (a `run` process's
-- connections live for days, from an empty table to millions of rows), so
-- none may depend on the table's size when it was made: every statement
-- reaches payloads through an index, by a webhook's queue range or by key,
-- and sequential scans are off for it, so a plan made while payloads was
-- empty does not scan the history it grows (test/delivery/cached-plans.test.ts).
-- The webhooks table has no index for the visit's filters and is scanned
-- anyway; the cost the planner adds to a scan it may not choose puts the
-- visit over JIT's threshold, and compiling it would cost more than it runs:
-- JIT is off for it. Bitmap scans are off as well: a webhook's slots are
-- read through in_flight_webhook, whose entries of deleted slot rows (one
-- per attempt) a plain index scan marks dead as it passes them and skips
-- afterwards, while a bitmap scan visits every one of them again at every
-- claim until vacuum (thousands for a few dozen live rows under load).
set enable_seqscan = off
set enable_bitmapscan = off
set jit = off
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  w record;
  -- Read once: every check of this call is made at one time.
  v_now timestamptz := asset_webhooks.now();
  v_window interval := make_interval(secs => p_expire_after_seconds);
  v_claimed integer := 0;
  -- The webhook's slots under its lock: requests sent (and not yet
  -- written), standbys held unsent, and every row (retry holds included).
  v_sent integer;
  v_standbys integer;
  v_held integer;
  v_take integer;
  v_room integer;
  v_ids bigint[];
  v_slots bigint[];
  v_head bigint;
  v_all bigint[] := '{}';
  -- Per visited webhook that got payloads: how many may be sent at once now.
  v_webhooks text[] := '{}';
  v_sendable integer[] := '{}';
  -- Rate limit: the bucket of the webhook visited, and the earliest next token of those held (seconds from v_now).
  v_rate record;
  v_tokens double precision;
  v_limited boolean;
  v_wake double precision;
begin
  -- Only webhooks that had a free slot and a payload for it when this
  -- statement began are visited: one statement over the configured webhooks,
  -- however many are idle or full, instead of several per webhook. It only
  -- filters: each visited webhook's slots are counted again under its lock.
  -- Its probes are keyed by webhook: `offset 0` keeps the planner from
  -- turning an EXISTS into a hashed subplan, which reads every queued
  -- payload of every webhook when the statistics say the queue is small.
  -- Whether a queue holds a payload is asked for its head, in the order of
  -- payloads_queue: as an EXISTS, a scan that stops at the first match
  -- looks cheap whenever the statistics say many payloads wait, and reads
  -- every row stored before the webhook's first queued one.
  --
  -- The webhooks looked at are those with a payload pending (waiting, in
  -- flight or held for a retry), found by a skip scan of payloads_queue: one
  -- probe per such webhook, so a claim costs what is being sent, not what is
  -- configured (10,000 webhooks of which 10 send). A payload holds a slot
  -- while it has an in_flight row; the queue's head is its first pending
  -- payload without one (those passed over are at most the slots).
  for w in
    with recursive pending(webhook_id) as (
      (select h.webhook_id from asset_webhooks.payloads h
       where h.status = 'pending' order by h.webhook_id limit 1)
      union all
      select (select h.webhook_id from asset_webhooks.payloads h
              where h.status = 'pending' and h.webhook_id > q.webhook_id
              order by h.webhook_id limit 1)
      from pending q where q.webhook_id is not null
    )
    -- sendable: requests that may be open at once; slots: attempts that may
    -- be started, standbys included.
    select k.webhook_id, k.concurrency, l.sendable, l.slots, l.retry_due,
           (select r.rate_per_second is not null from asset_webhooks.webhook_queues r
            where r.webhook_id = k.webhook_id) as rate_limited
    from pending
    join asset_webhooks.webhooks k on k.webhook_id = pending.webhook_id and pending.webhook_id is not null
    cross join lateral (select case when k.failing_since is not null then 1 else k.concurrency end as sendable) s
    cross join lateral (
      select s.sendable,
             s.sendable + case when k.failing_since is null and k.concurrency > 1 and k.webhook_id = any(p_standby_for)
                               then greatest(p_standby, 0) else 0 end as slots,
             exists (select 1 from asset_webhooks.in_flight r
                     where r.webhook_id = k.webhook_id and r.next_attempt_at <= v_now offset 0) as retry_due) l
    -- A paused webhook's payloads, retries included, wait for its resume.
    where k.enabled and k.paused_since is null and (k.hold_until is null or k.hold_until <= v_now)
      and exists (select from asset_webhooks.in_flight f
                  where f.webhook_id = k.webhook_id and f.next_attempt_at is null
                  having count(*) filter (where f.sent) < l.sendable
                      or count(*) filter (where not f.sent) < l.slots - l.sendable)
      and (l.retry_due
           or (select h.payload_id from asset_webhooks.payloads h
               where h.webhook_id = k.webhook_id and h.status = 'pending'
                 and not exists (select 1 from asset_webhooks.in_flight f where f.payload_id = h.payload_id)
               order by h.payload_id + 0 limit 1) is not null)
    order by k.webhook_id <= coalesce(p_after, ''), k.webhook_id
  loop
    exit when v_claimed >= p_max;
    -- The webhook's claim lock: its row, which only the service's roles can
    -- lock. `for no key update` leaves inserts of its payloads (their foreign
    -- key's share lock) free; a webhook locked elsewhere is skipped.
    perform from asset_webhooks.webhooks k where k.webhook_id = w.webhook_id for no key update skip locked;
    continue when not found;
    -- Its slots, whose payloads the queue scans below pass over by this list.
    select count(*) filter (where f.next_attempt_at is null and f.sent),
           count(*) filter (where f.next_attempt_at is null and not f.sent), count(*),
           coalesce(array_agg(f.payload_id), '{}')
    into v_sent, v_standbys, v_held, v_slots
    from asset_webhooks.in_flight f
    where f.webhook_id = w.webhook_id;
    -- Requests up to the concurrency, counting those sent only: a standby
    -- held is at no receiver, and is sent only in place of a request that
    -- has ended and still counts here until its result is written. Counting
    -- standbys as requests kept a webhook whose standbys outlived its
    -- requests at half its concurrency: each answer let one standby replace
    -- its request, and no claim ever added one.
    v_take := least(greatest(w.sendable - v_sent, 0) + greatest(w.slots - w.sendable - v_standbys, 0), p_share,
                    p_max - v_claimed);
    continue when v_take <= 0;
    v_limited := false;
    if w.rate_limited then
      select q.rate_current, q.rate_burst, q.rate_held_since,
             asset_webhooks.bucket_tokens(q.rate_tokens, q.rate_current, q.rate_burst, q.rate_refilled_at, v_now)
               as tokens
      into v_rate
      from asset_webhooks.webhook_queues q
      where q.webhook_id = w.webhook_id and q.rate_per_second is not null
      for update skip locked;
      continue when not found;
      v_tokens := v_rate.tokens;
      -- No standby: a request waits for its token, not for a slot.
      v_take := least(v_take, w.sendable - v_sent);
      continue when v_take <= 0;
      if v_tokens < 1 then
        v_wake := least(v_wake, (1 - v_tokens) / v_rate.rate_current);
        if v_rate.rate_held_since is null then
          update asset_webhooks.webhook_queues q set rate_held_since = v_now where q.webhook_id = w.webhook_id;
        end if;
        continue;
      end if;
      v_limited := floor(v_tokens) < v_take;
      v_take := least(v_take, floor(v_tokens)::integer);
    end if;
    -- Retries come due only with time: one that was not due when this
    -- statement began is left to the next claim, and its query is skipped.
    v_ids := case when w.retry_due then
               array(select q.payload_id from asset_webhooks.in_flight f
                     join asset_webhooks.payloads q on q.payload_id = f.payload_id
                     where f.webhook_id = w.webhook_id and f.next_attempt_at <= v_now
                       and q.status = 'pending' and v_now < q.series_started_at + v_window
                     order by q.payload_id limit v_take for update of q skip locked)
             else '{}' end;
    -- Waiting retries hold slots of the concurrency, not of the failing limit.
    v_room := least(v_take - cardinality(v_ids), greatest(w.slots, w.concurrency) - v_held);
    if v_room > 0 and w.concurrency = 1 then
      select q.payload_id into v_head from asset_webhooks.payloads q
      where q.webhook_id = w.webhook_id and q.status = 'pending' and q.payload_id <> all(v_slots)
      order by q.payload_id + 0 limit 1;
      v_ids := v_ids || array(select q.payload_id from asset_webhooks.payloads q
                              where q.payload_id = v_head and q.status = 'pending'
                              for update skip locked);
    elsif v_room > 0 then
      v_ids := v_ids || array(select q.payload_id from asset_webhooks.payloads q
                              where q.webhook_id = w.webhook_id and q.status = 'pending'
                                and q.payload_id <> all(v_slots)
                                and v_now < q.series_started_at + v_window
                              order by q.payload_id + 0 limit v_room for update skip locked);
    end if;
    if w.rate_limited then
      -- Held while the tokens, not the queue, decided how many were claimed.
      v_limited := v_limited and cardinality(v_ids) = v_take;
      update asset_webhooks.webhook_queues q
      set rate_tokens = v_tokens - cardinality(v_ids), rate_refilled_at = v_now,
          rate_held_since = case when v_limited then coalesce(q.rate_held_since, v_now) end,
          rate_held_seconds = q.rate_held_seconds + case when v_limited or q.rate_held_since is null then 0
                                                         else greatest(extract(epoch from v_now - q.rate_held_since), 0) end
      where q.webhook_id = w.webhook_id;
      if v_limited then
        v_wake := least(v_wake, (1 - (v_tokens - cardinality(v_ids))) / v_rate.rate_current);
      end if;
    end if;
    continue when cardinality(v_ids) = 0;
    -- Counted whether due or not: p_max bounds requests, and a payload that
    -- waits in its slot for its retry time takes none, so this errs low.
    v_all := v_all || v_ids;
    v_claimed := v_claimed + cardinality(v_ids);
    v_webhooks := v_webhooks || w.webhook_id;
    v_sendable := v_sendable || greatest(w.sendable - v_sent, 0);
  end loop;
  -- Started by one statement, kept planned for the session (see start_attempts).
  return query
    select a.payload_id, a.webhook_id, a.series, a.attempt, a.series_started_at, a.body, a.standby, null::integer
    from asset_webhooks.start_attempts(v_all, v_webhooks, v_sendable, v_now, v_window) a;
  if v_wake is not null then
    return query select null::bigint, null::text, null::integer, null::integer, null::timestamptz, null::text,
                        null::boolean, greatest(ceil(v_wake * 1000), 1)::integer;
  end if;
end $$;
