-- 0001: the outbox, consumed events, payloads, attempts and the operator views.
--
-- Data flows one way through these tables:
--   outbox --(coalesce: claim, collapse, route, pack)--> events + payloads --(deliver)--> attempts
-- The migrator runs this file in one transaction together with its bookkeeping row.

-- One row per captured change, written by a binding's triggers in the same
-- transaction as the change. Rows are claimed with FOR UPDATE SKIP LOCKED and
-- deleted by the coalescer in the transaction that records their outcome, so the
-- table holds only what has not been coalesced yet. It is never read by "seq
-- greater than the last seen": sequence values commit out of order.
create table asset_webhooks.outbox (
  seq          bigint generated always as identity primary key,
  event_id     uuid not null default gen_random_uuid(),
  occurred_at  timestamptz not null default clock_timestamp(),
  event_type   text not null check (event_type in ('CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION')),
  asset_id     bigint not null,
  -- What the coalescer and operators still need once the asset row is gone (PURGED).
  asset_uuid   uuid,
  atom_id      bigint,
  supertype    text,
  parent_id    bigint
);
-- Collapsing looks up the latest EDITED row of the assets in a chunk.
create index outbox_edited_by_asset on asset_webhooks.outbox (asset_id, seq) where event_type = 'EDITED';

-- A capture that failed inside a trigger never fails the source write; it is
-- recorded here instead, so it is never silent (see the binding's functions).
create table asset_webhooks.capture_errors (
  capture_error_id bigint generated always as identity primary key,
  occurred_at      timestamptz not null default clock_timestamp(),
  table_name       text not null,
  operation        text not null,
  sqlstate         text not null,
  message          text not null
);

create function asset_webhooks.record_capture_error(p_table text, p_operation text, p_sqlstate text, p_message text)
returns void language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
  insert into asset_webhooks.capture_errors (table_name, operation, sqlstate, message)
  values (p_table, p_operation, p_sqlstate, p_message);
  raise warning 'asset_webhooks: change on % (%) was not captured: % %', p_table, p_operation, p_sqlstate, p_message;
exception when others then
  raise warning 'asset_webhooks: change on % (%) was not captured and the error could not be recorded: % %',
    p_table, p_operation, p_sqlstate, p_message;
end $$;

-- The webhooks of the configuration as the running service last saw them.
-- Written by `run` at start and on every reload; the views and the delivery
-- pump read it. The url is stored without credentials.
create table asset_webhooks.webhooks (
  webhook_id   text primary key,
  url          text not null,
  enabled      boolean not null,
  concurrency  integer not null default 1 check (concurrency between 1 and 64),
  updated_at   timestamptz not null default now()
);

-- One row per coalescing run.
create table asset_webhooks.coalesce_runs (
  run_id       bigint generated always as identity primary key,
  started_at   timestamptz not null default clock_timestamp(),
  finished_at  timestamptz,
  events       integer not null default 0,
  payloads     integer not null default 0
);

-- Exactly-once ticks for intervals that graphile-worker's cron cannot express:
-- every `run` process tries to insert the current slot; the one whose insert
-- returns a row schedules the coalescing job.
create table asset_webhooks.ticks (
  slot        bigint primary key,
  created_at  timestamptz not null default now()
);

-- A payload: the exact bytes that every attempt sends. `open` payloads are still
-- being filled by a running coalesce run and are never dispatched.
create table asset_webhooks.payloads (
  payload_id          bigint generated always as identity primary key,
  webhook_id          text not null,
  run_id              bigint,
  created_at          timestamptz not null default clock_timestamp(),
  status              text not null default 'open'
                      check (status in ('open', 'pending', 'delivered', 'dead_lettered')),
  -- true while a delivery job exists for this payload (see the dispatch pump).
  dispatched          boolean not null default false,
  body                text not null,
  byte_size           integer not null,
  event_count         integer not null,
  event_ids           uuid[] not null,
  -- The series counts redeliveries: 1 for the first series of attempts.
  series              integer not null default 1,
  -- Start of the current series: creation, or an operator's redelivery. The
  -- payload expires deadLetterAfterSeconds after it.
  series_started_at   timestamptz not null default clock_timestamp(),
  attempts            integer not null default 0,
  next_attempt_at     timestamptz,
  last_attempt_at     timestamptz,
  last_status_code    integer,
  last_error          text,
  delivered_at        timestamptz,
  dead_lettered_at    timestamptz,
  dead_letter_reason  text check (dead_letter_reason in ('rejected', 'retries_exhausted', 'expired', 'too_large'))
);
create index payloads_waiting on asset_webhooks.payloads (webhook_id, payload_id) where status in ('open', 'pending');
create index payloads_dead on asset_webhooks.payloads (webhook_id, dead_lettered_at) where status = 'dead_lettered';
create index payloads_created on asset_webhooks.payloads (created_at);

-- Every delivery attempt. The row is written before the request is sent, so a
-- crash mid-attempt leaves a row without a result rather than no row.
create table asset_webhooks.attempts (
  payload_id        bigint not null references asset_webhooks.payloads (payload_id) on delete cascade,
  series            integer not null,
  attempt_no        integer not null,
  started_at        timestamptz not null,
  duration_ms       integer,
  status_code       integer,
  error_class       text,
  error_message     text,
  response_excerpt  text,
  outcome           text check (outcome in ('delivered', 'retry', 'rejected', 'retries_exhausted', 'expired')),
  primary key (payload_id, series, attempt_no)
);

-- Operator redeliveries of dead-lettered payloads.
create table asset_webhooks.redeliveries (
  payload_id       bigint not null references asset_webhooks.payloads (payload_id) on delete cascade,
  series           integer not null,
  requested_at     timestamptz not null default now(),
  requested_by     text not null,
  previous_reason  text,
  primary key (payload_id, series)
);

-- The key of the delivery job of one attempt: lets maintenance find a
-- payload's job, and makes adding the same attempt twice a no-op.
create function asset_webhooks.deliver_job_key(p_payload_id bigint, p_series integer, p_attempt integer) returns text
language sql immutable as $$ select 'deliver:' || p_payload_id || ':' || p_series || ':' || p_attempt $$;

-- Adds the delivery job of one attempt: the only place that does, so the job
-- shape (payload, key, attempts) is the same for first attempts, retries and
-- handoffs.
create function asset_webhooks.enqueue_delivery(p_payload_id bigint, p_series integer, p_attempt integer, p_run_at timestamptz)
returns void language plpgsql as $$
begin
  -- plpgsql, not sql: its body is resolved at call time, after `migrate` has
  -- installed graphile-worker's schema.
  perform graphile_worker.add_job(
    'deliver',
    json_build_object('payloadId', p_payload_id, 'series', p_series, 'attempt', p_attempt),
    run_at := greatest(p_run_at, now()),
    max_attempts := 25,
    job_key := asset_webhooks.deliver_job_key(p_payload_id, p_series, p_attempt));
end $$;

-- The dispatch pump: starts delivery jobs for a webhook's oldest pending
-- payloads, up to its concurrency minus those already in flight. With
-- concurrency 1 a payload is therefore not sent before the previous one is
-- delivered or dead-lettered. Called after coalescing, after every final
-- outcome, after a redelivery and when a webhook is enabled. The advisory lock
-- serialises pumps of one webhook so two callers cannot both fill the slots.
-- graphile_worker.add_job is resolved at call time: `migrate` installs
-- graphile-worker's schema after this file.
create function asset_webhooks.dispatch(p_webhook_id text) returns integer
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
                           order by q.payload_id limit v_slots)
    returning p.payload_id, p.series, p.attempts, p.next_attempt_at
  loop
    perform asset_webhooks.enqueue_delivery(r.payload_id, r.series, r.attempts + 1, coalesce(r.next_attempt_at, now()));
    v_started := v_started + 1;
  end loop;
  return v_started;
end $$;

-- The handoff: a delivery that just ended (delivered or dead-lettered, in the
-- same transaction) passes its slot to the webhook's next pending payload.
-- No lock on the webhook is needed: the ending payload stops counting and the
-- next one starts counting in one commit, so anyone counting sees the same
-- number in flight before and after. SKIP LOCKED lets concurrent finishers
-- take different payloads; with concurrency 1 the head is waited for instead,
-- so strict order holds. A webhook that is disabled, or over its (reduced)
-- concurrency, gets no handoff.
create function asset_webhooks.hand_off(p_webhook_id text) returns integer
language plpgsql as $$
declare
  v_limit integer;
  v_in_flight integer;
  v_next bigint;
  r record;
begin
  select w.concurrency into v_limit from asset_webhooks.webhooks w where w.webhook_id = p_webhook_id and w.enabled;
  if v_limit is null then
    return 0;
  end if;
  select count(*) into v_in_flight from asset_webhooks.payloads p
  where p.webhook_id = p_webhook_id and p.status = 'pending' and p.dispatched;
  if v_in_flight >= v_limit then
    return 0;
  end if;
  if v_limit = 1 then
    select q.payload_id into v_next from asset_webhooks.payloads q
    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
    order by q.payload_id limit 1 for update;
  else
    select q.payload_id into v_next from asset_webhooks.payloads q
    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
    order by q.payload_id limit 1 for update skip locked;
  end if;
  if v_next is null then
    return 0;
  end if;
  update asset_webhooks.payloads p set dispatched = true
  where p.payload_id = v_next and not p.dispatched
  returning p.payload_id, p.series, p.attempts, p.next_attempt_at into r;
  if r is null then
    return 0;
  end if;
  perform asset_webhooks.enqueue_delivery(r.payload_id, r.series, r.attempts + 1, coalesce(r.next_attempt_at, now()));
  return 1;
end $$;

-- Records the result of an attempt and applies the payload's next state, as
-- decided by the service's retry policy (src/delivery/policy/next-state.ts),
-- in one statement: one round trip after the POST instead of seven. The
-- payload is locked and checked first: if an operator acted meanwhile (a new
-- series) or the attempt is no longer the payload's latest, only the attempt's
-- result is recorded (outcome 'retry'), and false is returned.
--   p_outcome: delivered | retry | rejected | retries_exhausted | expired
create function asset_webhooks.settle_attempt(
  p_payload_id bigint, p_series integer, p_attempt integer,
  p_duration_ms integer, p_status_code integer, p_error_class text, p_error_message text, p_excerpt text,
  p_outcome text, p_at timestamptz, p_retry_at timestamptz
) returns boolean
language plpgsql as $$
declare
  v_payload asset_webhooks.payloads%rowtype;
  v_current boolean;
begin
  select * into v_payload from asset_webhooks.payloads where payload_id = p_payload_id for update;
  v_current := found and v_payload.series = p_series and v_payload.attempts = p_attempt and v_payload.status = 'pending';
  update asset_webhooks.attempts
  set duration_ms = p_duration_ms, status_code = p_status_code, error_class = p_error_class, error_message = p_error_message,
      response_excerpt = p_excerpt, outcome = case when v_current then p_outcome else 'retry' end
  where payload_id = p_payload_id and series = p_series and attempt_no = p_attempt;
  if not v_current then
    return false;
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
  else
    perform asset_webhooks.hand_off(v_payload.webhook_id);
  end if;
  return true;
end $$;

-- Consumed events with their outcome per webhook. `routes` maps every webhook
-- configured at coalescing time to either the payload id (a number) that
-- carries the event, or a string: the check that excluded it, or 'collapsed'.
-- One jsonb per event keeps a million events times many webhooks compact.
create table asset_webhooks.events (
  event_id        uuid primary key,
  seq             bigint not null,
  occurred_at     timestamptz not null,
  event_type      text not null,
  asset_id        bigint not null,
  asset_uuid      uuid,
  -- atomId as delivered: for EDITED the asset's latest atom at coalescing time.
  atom_id         bigint,
  run_id          bigint not null,
  coalesced_at    timestamptz not null,
  collapsed_into  uuid,
  routes          jsonb not null
);
create index events_occurred_at on asset_webhooks.events (occurred_at);
create index events_asset on asset_webhooks.events (asset_id, occurred_at);
create index events_coalesced_at on asset_webhooks.events (coalesced_at);

create view asset_webhooks.event_outcomes as
select e.event_id,
       e.event_type,
       e.asset_id,
       e.asset_uuid,
       e.occurred_at,
       r.key as webhook_id,
       case
         when jsonb_typeof(r.value) = 'number' then
           case p.status when 'delivered' then 'delivered' when 'dead_lettered' then 'dead_lettered' else 'pending' end
         when r.value = '"collapsed"'::jsonb then 'collapsed'
         else 'excluded'
       end as outcome,
       case when jsonb_typeof(r.value) = 'string' and r.value <> '"collapsed"'::jsonb then r.value #>> '{}' end as excluded_by,
       p.payload_id,
       e.collapsed_into,
       e.atom_id,
       e.coalesced_at
from asset_webhooks.events e
cross join lateral jsonb_each(e.routes) r
left join asset_webhooks.payloads p
  on p.payload_id = case when jsonb_typeof(r.value) = 'number' then (r.value)::bigint end;

create view asset_webhooks.dead_letters as
select p.payload_id,
       p.webhook_id,
       p.dead_letter_reason as reason,
       p.attempts,
       p.last_status_code,
       p.last_error,
       p.event_count,
       p.event_ids,
       p.created_at,
       p.last_attempt_at,
       p.dead_lettered_at,
       p.series,
       p.byte_size
from asset_webhooks.payloads p
where p.status = 'dead_lettered';
