-- Delivery chains. A delivery job that ends a payload for good (delivered or
-- dead-lettered) may go on with its webhook's next payload in the same job
-- instead of adding a job for it: the slot passes exactly as in hand_off, but
-- the next attempt is recorded as started in the same statement that settles
-- the previous one. One round trip per payload instead of a job fetch, a start
-- transaction, a settle and a job completion. The job ends its chain after a
-- time budget, on shutdown, or when the next payload is not due yet; then the
-- slot is handed off with a job as before.
--
-- A chained payload has no job of its own while it is in flight. If its worker
-- dies, the maintenance task finds it dispatched without a live job once its
-- attempt is ten minutes old, closes the attempt as interrupted and hands it
-- back (src/maintenance/maintenance.ts).

-- What take_next reads on every ended payload: the webhook's payloads in
-- flight (at most its concurrency), and the head of those waiting. With
-- payloads_waiting alone both read the whole backlog, so a backlog of n cost
-- n² to deliver.
create index payloads_in_flight on asset_webhooks.payloads (webhook_id) where status = 'pending' and dispatched;
create index payloads_undispatched on asset_webhooks.payloads (webhook_id, payload_id) where status = 'pending' and not dispatched;

-- Takes the webhook's next pending payload for a slot that just became free
-- and marks it dispatched; the rules of hand_off (which now calls it): none
-- when the webhook is disabled or already at its concurrency; SKIP LOCKED so
-- concurrent finishers take different payloads, except with concurrency 1,
-- where the head is waited for so strict order holds. Null when there is none.
-- With p_start_at, a payload that may be sent at once (it is due: not waiting
-- for a retry time, and its series has not expired) also has its next attempt
-- counted as started then, in the same row update. Otherwise it gets a job as
-- from hand_off, which waits or dead-letters it. (Written out rather than as a
-- SQL function: plpgsql calls one at ~50 us, a third of a delivery's cost.)
create function asset_webhooks.take_next(p_webhook_id text, p_start_at timestamptz default null,
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
    order by q.payload_id limit 1 for update;
  else
    select q.payload_id, q.next_attempt_at, q.series_started_at into v_next, v_next_attempt_at, v_series_started_at
    from asset_webhooks.payloads q
    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
    order by q.payload_id limit 1 for update skip locked;
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

create or replace function asset_webhooks.hand_off(p_webhook_id text) returns integer
language plpgsql as $$
declare
  r asset_webhooks.payloads;
begin
  r := asset_webhooks.take_next(p_webhook_id);
  if r.payload_id is null then
    return 0;
  end if;
  perform asset_webhooks.enqueue_delivery(r.payload_id, r.series, r.attempts + 1, coalesce(r.next_attempt_at, now()));
  return 1;
end $$;

drop function asset_webhooks.settle_attempt(bigint, integer, integer, integer, integer, text, text, text, text, timestamptz, timestamptz);

-- Records the result of an attempt and applies the payload's next state, as
-- decided by the service's retry policy (src/delivery/policy/next-state.ts),
-- in one statement. The payload is locked and checked first: if an operator
-- acted meanwhile (a new series) or the attempt is no longer the payload's
-- latest, only the attempt's result is recorded (outcome 'retry') and
-- `applied` is false.
--   p_outcome: delivered | retry | rejected | retries_exhausted | expired
-- With p_chain, a final outcome takes the webhook's next payload and, when it
-- is due and not expired (p_expire_after_seconds after its series started),
-- records its attempt as started and returns it (next_*); a next payload that
-- is not due or expired gets a job as from hand_off, which handles both.
create function asset_webhooks.settle_attempt(
  p_payload_id bigint, p_series integer, p_attempt integer,
  p_duration_ms integer, p_status_code integer, p_error_class text, p_error_message text, p_excerpt text,
  p_outcome text, p_at timestamptz, p_retry_at timestamptz,
  p_chain boolean, p_expire_after_seconds integer
) returns table (
  applied boolean, next_payload_id bigint, next_webhook_id text, next_series integer, next_attempt integer,
  next_series_started_at timestamptz, next_body text
)
language plpgsql as $$
declare
  v_webhook_id text;
  v_series integer;
  v_attempts integer;
  v_status text;
  v_current boolean;
  v_next asset_webhooks.payloads;
begin
  -- Only the columns needed: `select *` into a row variable would also fetch
  -- and decompress the body.
  select p.webhook_id, p.series, p.attempts, p.status into v_webhook_id, v_series, v_attempts, v_status
  from asset_webhooks.payloads p where p.payload_id = p_payload_id for update;
  v_current := found and v_series = p_series and v_attempts = p_attempt and v_status = 'pending';
  update asset_webhooks.attempts
  set duration_ms = p_duration_ms, status_code = p_status_code, error_class = p_error_class, error_message = p_error_message,
      response_excerpt = p_excerpt, outcome = case when v_current then p_outcome else 'retry' end
  where payload_id = p_payload_id and series = p_series and attempt_no = p_attempt;
  if not v_current then
    return query select false, null::bigint, null::text, null::integer, null::integer, null::timestamptz, null::text;
    return;
  end if;
  update asset_webhooks.payloads
  set last_status_code = p_status_code,
      last_error = case when p_error_class is null then null else p_error_class || ': ' || coalesce(p_error_message, '') end,
      status = case p_outcome when 'delivered' then 'delivered' when 'retry' then 'pending' else 'dead_lettered' end,
      delivered_at = case when p_outcome = 'delivered' then p_at end,
      dead_letter_reason = case when p_outcome not in ('delivered', 'retry') then p_outcome end,
      dead_lettered_at = case when p_outcome not in ('delivered', 'retry') then p_at end,
      dispatched = (p_outcome = 'retry'),
      next_attempt_at = case when p_outcome = 'retry' then p_retry_at end
  where payload_id = p_payload_id;
  if p_outcome = 'retry' then
    perform asset_webhooks.enqueue_delivery(p_payload_id, p_series, p_attempt + 1, p_retry_at);
  elsif not p_chain then
    perform asset_webhooks.hand_off(v_webhook_id);
  else
    v_next := asset_webhooks.take_next(v_webhook_id, p_at, p_expire_after_seconds);
    if v_next.payload_id is not null then
      -- The condition take_next applied (unchanged by its update): it counted the attempt.
      if coalesce(v_next.next_attempt_at, p_at) <= p_at
         and p_at < v_next.series_started_at + make_interval(secs => p_expire_after_seconds) then
        insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at)
        values (v_next.payload_id, v_next.series, v_next.attempts, p_at);
        return query select true, v_next.payload_id, v_next.webhook_id, v_next.series, v_next.attempts,
                            v_next.series_started_at, v_next.body;
        return;
      end if;
      perform asset_webhooks.enqueue_delivery(v_next.payload_id, v_next.series, v_next.attempts + 1,
                                              coalesce(v_next.next_attempt_at, now()));
    end if;
  end if;
  return query select true, null::bigint, null::text, null::integer, null::integer, null::timestamptz, null::text;
end $$;

-- Undoes the start of a chained attempt that will not be made after all (its
-- webhook was disabled or removed by a reload the database had not seen yet):
-- the payload goes back to the pump as it was.
create function asset_webhooks.abandon_attempt(p_payload_id bigint, p_series integer, p_attempt integer) returns void
language sql as $$
  delete from asset_webhooks.attempts
  where payload_id = p_payload_id and series = p_series and attempt_no = p_attempt and outcome is null;
  update asset_webhooks.payloads set attempts = p_attempt - 1, dispatched = false
  where payload_id = p_payload_id and series = p_series and attempts = p_attempt and status = 'pending';
$$;
