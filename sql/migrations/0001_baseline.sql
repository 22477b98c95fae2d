-- The schema asset_webhooks: the outbox that capture triggers write, the
-- events and payloads that coalescing makes of it, the attempts that delivery
-- records, and the views and functions operators and the service use on them.
--
-- Data flows one way through these tables:
--   outbox --(coalesce: claim, collapse, route, pack)--> events + payloads --(deliver)--> attempts
--
-- `asset-webhooks migrate` runs this file in one transaction together with its
-- row in asset_webhooks.migrations (a table the migrator creates itself), then
-- installs graphile-worker's schema, then the binding (the view
-- asset_webhooks.asset_state and the capture triggers). Until the first
-- release this baseline is changed in place; after it, schema changes are
-- forward-only numbered files after it (see CHANGELOG.md).

-- The event types a capture may record; what a webhook's `events` filter names.
-- A domain rather than a CHECK on the outbox column: a table CHECK is read
-- back from its stored text and planned by every statement that inserts into
-- the table, that is by every captured statement of the asset database, while
-- a domain's check is loaded once per connection. A row that breaks it fails
-- with check_violation (23514), which the binding records as a capture error.
create domain asset_webhooks.event_type as text
  constraint event_type_check check (value in ('CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'));

-- One row per captured change, written by a binding's triggers in the same
-- transaction as the change, so a change is captured if and only if it commits.
-- Rows are consumed without row locks (no FOR UPDATE): only the coalescing
-- run that holds the coalescing advisory lock claims or deletes them
-- (src/coalesce/run.ts, src/coalesce/claim.ts). It deletes them in the
-- transaction that records their events, so the table holds only what has
-- not been coalesced yet. It is
-- never read by "seq greater than the last seen": sequence values commit out
-- of order. The table keeps only its primary key: every index here would be
-- paid for inside the asset database's own writes; a run reads the latest
-- edit of each asset in one pass over its backlog instead.
create table asset_webhooks.outbox (
  seq          bigint generated always as identity primary key,
  -- Null unless the binding gives its own id; otherwise the eventId is derived
  -- from seq and occurred_at by asset_webhooks.event_id_of. A stored value
  -- wins everywhere.
  event_id     uuid,
  occurred_at  timestamptz not null default clock_timestamp(),
  event_type   asset_webhooks.event_type not null,
  asset_id     bigint not null,
  -- What the coalescer and operators still need once the asset row is gone (PURGED).
  asset_uuid   uuid,
  atom_id      bigint,
  supertype    text,
  parent_id    bigint
);

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

-- Records a failed capture and warns; never raises, so the asset database's
-- write goes on whatever happens here. Security definer so that the roles of
-- the application need no privilege on capture_errors.
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

-- eventIds are derived from the outbox row when it is read (coalescing,
-- investigation), not generated when it is written, so the capture path only
-- stores the row.
--
-- The ids are UUIDv7 (RFC 9562): 48 bits of occurred_at in milliseconds, then
-- 74 bits taken from seq mixed with a random key of this installation. They
-- are unique within the installation because seq is (the mix is a bijection),
-- stay unique if the sequence were ever restarted (the time differs), do not
-- repeat across installations (the key differs), and sort by time. They are
-- not secrets and not meant to be unguessable. The key is drawn once, here,
-- and lives only in the two functions' text: src/coalesce/event-ids.ts reads
-- it back from event_id_of and derives the same ids in Node.
do $baseline$
declare
  -- 62 bits for the low half (the top two bits carry the UUID variant) and 12
  -- bits after the version digit, random per installation.
  v_key bigint := ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint & 4611686018427387903;
  v_rand_a text := substr(md5(gen_random_uuid()::text), 1, 3);
begin
  execute format($f$
    create function asset_webhooks.event_id_of(p_seq bigint, p_occurred_at timestamptz) returns uuid
    language sql immutable parallel safe as $body$
      select (lpad(to_hex(floor(extract(epoch from p_occurred_at) * 1000)::bigint), 12, '0')
              || '7' || %L
              || to_hex(((p_seq # %s::bigint) & 4611686018427387903) | (-9223372036854775808)::bigint))::uuid
    $body$$f$, v_rand_a, v_key);
  -- The inverse for lookups: the seq an id was derived from (meaningless for
  -- ids not made by event_id_of; callers compare the id again).
  execute format($f$
    create function asset_webhooks.event_seq_of(p_event_id uuid) returns bigint
    language sql immutable parallel safe as $body$
      select (('x' || right(replace(p_event_id::text, '-', ''), 16))::bit(64)::bigint & 4611686018427387903) # %s::bigint
    $body$$f$, v_key);
end $baseline$;

-- The outbox as operators read it: rows not coalesced yet, with their eventId.
create view asset_webhooks.waiting_events as
select o.seq,
       coalesce(o.event_id, asset_webhooks.event_id_of(o.seq, o.occurred_at)) as event_id,
       o.occurred_at, o.event_type, o.asset_id, o.asset_uuid, o.atom_id, o.supertype, o.parent_id
from asset_webhooks.outbox o;

-- One waiting event by its id: by seq when the id was derived, else by the stored id.
create function asset_webhooks.find_waiting_event(p_event_id uuid) returns setof asset_webhooks.waiting_events
language sql stable as $$
  select w.* from asset_webhooks.waiting_events w
  where w.seq = asset_webhooks.event_seq_of(p_event_id) and w.event_id = p_event_id
  union
  select w.* from asset_webhooks.waiting_events w
  join asset_webhooks.outbox o on o.seq = w.seq
  where o.event_id = p_event_id
$$;

-- The webhooks of the configuration as the running service last saw them.
-- Written by `run` at start and on every reload; the views and the delivery
-- pump read it. The url is stored without credentials.
create table asset_webhooks.webhooks (
  webhook_id   text primary key,
  url          text not null,
  enabled      boolean not null,
  concurrency  integer not null default 1 check (concurrency between 1 and 64),
  -- When the webhook was paused (`paused: true`); null while it is not. Set
  -- only for an enabled webhook (`enabled: false` wins over `paused`). While
  -- set, none of the webhook's payloads is dispatched and none expires: the
  -- expiry clock stands still. Resuming (src/service/service-state.ts,
  -- syncWebhooks) clears it and, in the same statement, moves each waiting
  -- payload's series_started_at forward by the time it spent paused.
  paused_since timestamptz,
  updated_at   timestamptz not null default now()
);

-- One row per coalescing run. Retention deletes them oldest first, through
-- the index on started_at, so its cost does not grow with history.
create table asset_webhooks.coalesce_runs (
  run_id       bigint generated always as identity primary key,
  started_at   timestamptz not null default clock_timestamp(),
  finished_at  timestamptz,
  events       integer not null default 0,
  payloads     integer not null default 0
);
create index coalesce_runs_started_at on asset_webhooks.coalesce_runs (started_at);

-- Exactly-once ticks for intervals that graphile-worker's cron cannot express:
-- every `run` process tries to insert the current slot; the one whose insert
-- returns a row schedules the coalescing job. Retention reads them by created_at.
create table asset_webhooks.ticks (
  slot        bigint primary key,
  created_at  timestamptz not null default now()
);
create index ticks_created_at on asset_webhooks.ticks (created_at);

-- A payload: the exact bytes that every attempt sends. `open` payloads are
-- still being filled by a running coalescing run and are never dispatched.
-- A payload is in flight when it is pending and dispatched: it then has a
-- delivery job, or is the next payload of a delivery job's chain. A webhook
-- never has more payloads in flight than its concurrency, and with
-- concurrency 1 its payloads are sent in payload_id order, each after the
-- previous one is delivered or dead-lettered.
create table asset_webhooks.payloads (
  payload_id          bigint generated always as identity primary key,
  webhook_id          text not null,
  run_id              bigint,
  created_at          timestamptz not null default clock_timestamp(),
  status              text not null default 'open'
                      check (status in ('open', 'pending', 'delivered', 'dead_lettered')),
  -- true while the payload is in flight (see above and asset_webhooks.dispatch).
  dispatched          boolean not null default false,
  body                text not null,
  byte_size           integer not null,
  event_count         integer not null,
  event_ids           uuid[] not null,
  -- The series counts redeliveries: 1 for the first series of attempts.
  series              integer not null default 1,
  -- Start of the current series: creation, or an operator's redelivery,
  -- moved forward by any time the series then spent with its webhook paused
  -- (webhooks.paused_since). The payload expires deadLetterAfterSeconds after it.
  series_started_at   timestamptz not null default clock_timestamp(),
  attempts            integer not null default 0,
  next_attempt_at     timestamptz,
  last_attempt_at     timestamptz,
  last_status_code    integer,
  last_error          text,
  delivered_at        timestamptz,
  dead_lettered_at    timestamptz,
  dead_letter_reason  text check (dead_letter_reason in ('rejected', 'retries_exhausted', 'expired', 'too_large', 'webhook_removed'))
)
-- Delivery writes two versions of every payload row (an attempt starts, then
-- settles) and changes neither body nor event_ids. An UPDATE that leaves an
-- out-of-line value alone keeps pointing at it, so a row that is toasted at
-- all is toasted down to 1 kB, and event_ids goes out of line without a
-- compression attempt (random uuids do not compress): the row versions
-- delivery writes, and their WAL, then hold only the small columns.
with (toast_tuple_target = 1024);
alter table asset_webhooks.payloads alter column event_ids set storage external;

-- A coalescing run writes every routed event's JSON once per webhook that
-- receives it; lz4 compresses it at a fraction of pglz's cost. A server built
-- without lz4 keeps pglz: smaller on disk, slower to write.
do $baseline$
begin
  alter table asset_webhooks.payloads alter column body set compression lz4;
exception when feature_not_supported then
  raise notice 'lz4 is not available on this server: payload bodies stay compressed with pglz';
end $baseline$;

-- Every index below answers one query by reading only the rows it asks for,
-- whatever the table's history or statistics, so no path's cost grows with
-- the number of payloads delivered.
--
-- Operators' listings: a webhook's waiting payloads, and its dead letters.
create index payloads_waiting on asset_webhooks.payloads (webhook_id, payload_id) where status in ('open', 'pending');
create index payloads_dead on asset_webhooks.payloads (webhook_id, dead_lettered_at) where status = 'dead_lettered';
-- Retention: a payload ends after it is created, so maintenance asks for
-- created_at below the cutoff as well as the end time, and reads this index.
create index payloads_created on asset_webhooks.payloads (created_at);
-- A webhook's payloads in flight, counted whenever a slot may be taken (at
-- most its concurrency rows).
create index payloads_in_flight on asset_webhooks.payloads (webhook_id) where status = 'pending' and dispatched;
-- The head of a webhook's queue. Ordered by `payload_id + 0`, an expression
-- only this index provides, and dispatch, take_next and settle_attempts order
-- by the same expression: the primary key cannot serve their `order by ...
-- limit n` without sorting, so the planner never walks it from its start
-- over every payload already delivered (statistics taken while one webhook's
-- whole backlog waited would otherwise lead it there).
create index payloads_queue on asset_webhooks.payloads (webhook_id, (payload_id + 0))
  where status = 'pending' and not dispatched;
-- Expiry of waiting payloads (maintenance).
create index payloads_expiry on asset_webhooks.payloads (series_started_at) where status = 'pending' and not dispatched;
-- Sealing the payloads a coalescing run left open (at the start of every run).
create index payloads_open on asset_webhooks.payloads (webhook_id) where status = 'open';
-- `dead-letters` without --webhook: the newest first.
create index payloads_dead_newest on asset_webhooks.payloads (dead_lettered_at) where status = 'dead_lettered';

-- A `run` process holds a session advisory lock keyed by its id (its lease)
-- on a connection of its own for as long as it lives (src/service/process-lease.ts).
-- When the process dies, PostgreSQL ends its sessions and frees the lock, so
-- maintenance can tell a live process's slow attempt from a dead process's
-- orphan and hand the orphan's payload back at once.
--
-- The run process of this session, from its application_name, which the
-- service sets on every connection of its pool to 'asset-webhooks run '
-- followed by the process id: a UUID in canonical lower-case form (hex digits
-- in groups of 8, 4, 4, 4 and 12, joined by '-'), and nothing after it. Any
-- other name gives null. application_name is a standard startup parameter
-- that connection poolers pass on. Written without a regular expression: it
-- is evaluated for every attempt started (the default of attempts.process_id).
-- The LIKE pattern fixes the length, the prefix and where the four dashes are;
-- what is left once the hex digits are removed must be exactly those four, so
-- every other character is a lower-case hex digit. A single SELECT without
-- FROM, so the planner inlines it into the column default.
create function asset_webhooks.process_of_session() returns text
language sql stable parallel safe
as $$
  select case
    when current_setting('application_name') like 'asset-webhooks run ________-____-____-____-____________'
     and translate(substr(current_setting('application_name'), 20), '0123456789abcdef', '') = '----'
    then substr(current_setting('application_name'), 20)
  end
$$;

-- The advisory lock key of a process's lease.
create function asset_webhooks.process_lease_key(p_process_id text) returns bigint
language sql immutable parallel safe
as $$ select hashtextextended('asset_webhooks.process:' || p_process_id, 0) $$;

-- Whether the process is gone: nobody holds its lease. Tried with a
-- transaction-level lock, so it never waits. When the process is gone the
-- caller holds that lock until its transaction ends: meanwhile another probe
-- sees the lease held, and a process taking its lease back waits. Call it
-- in short transactions (maintenance's statement, trace, the runbook).
create function asset_webhooks.process_gone(p_process_id text) returns boolean
language sql volatile
as $$ select pg_try_advisory_xact_lock(asset_webhooks.process_lease_key(p_process_id)) $$;

-- Every delivery attempt. The row is written before the request is sent, so a
-- crash mid-attempt leaves a row without a result (outcome null) rather than
-- no row.
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
  -- Read from the session by default, so every statement that starts an
  -- attempt records it without restating it. A session with another
  -- application_name records null; maintenance then hands such an attempt
  -- back only once it is old (src/maintenance/maintenance.ts).
  process_id        text default asset_webhooks.process_of_session(),
  primary key (payload_id, series, attempt_no)
);
comment on column asset_webhooks.attempts.process_id is
  'The run process that started the attempt (its lease: asset_webhooks.process_lease_key); null when the session did not say';

-- Operator redeliveries of dead-lettered payloads, one row per new series.
create table asset_webhooks.redeliveries (
  payload_id       bigint not null references asset_webhooks.payloads (payload_id) on delete cascade,
  series           integer not null,
  requested_at     timestamptz not null default now(),
  requested_by     text not null,
  previous_reason  text,
  -- A redelivery that moved the payload to another webhook (`--to`) names the
  -- webhook it belonged to before; null when it stayed with its webhook. The
  -- payload's webhook_id names where the series is sent.
  moved_from       text,
  primary key (payload_id, series)
);

-- A backfill (`asset-webhooks backfill --webhook ID`, src/backfill/) sends one
-- EDITED event with a new eventId, to one webhook only, for every asset that
-- currently passes that webhook's checks, or for each listed asset. It writes
-- its payloads and their events directly, chunk by chunk; it does not go
-- through the outbox, so a backfill of a million assets never delays the
-- captured events of other webhooks behind its own rows.

-- One row per backfill. A chunk's payloads, its events and the advance of
-- last_asset_id commit in one transaction, so an interrupted backfill resumes
-- after the last asset whose event (or exclusion) committed, and no asset is
-- sent twice by one backfill. A backfill that completed is never resumed: a
-- later request with the same arguments starts a new one and sends again.
create table asset_webhooks.backfills (
  backfill_id    bigint generated always as identity primary key,
  webhook_id     text not null,
  -- The listed assets, distinct and ascending; null for every asset of the
  -- binding's asset_state view.
  asset_ids      bigint[],
  -- Which assets, as one short value the index below can hold whatever the
  -- length of the list: 'all', or the md5 of the listed ids joined by commas.
  assets_key     text not null,
  status         text not null default 'running' check (status in ('running', 'completed')),
  -- Keyset position: every asset with an id up to this one is done (sent, or
  -- excluded by a check, or listed but absent). Null before the first chunk.
  last_asset_id  bigint,
  -- Assets read, events sent (one per asset), assets excluded by the
  -- webhook's checks, payloads written.
  assets_read    bigint not null default 0,
  events_sent    bigint not null default 0,
  excluded       bigint not null default 0,
  payloads       bigint not null default 0,
  requested_by   text not null,
  started_at     timestamptz not null default clock_timestamp(),
  updated_at     timestamptz not null default clock_timestamp(),
  finished_at    timestamptz
);
-- At most one unfinished backfill per webhook and asset list: a second
-- request with the same arguments resumes it instead of starting another.
create unique index backfills_running on asset_webhooks.backfills (webhook_id, assets_key) where status = 'running';

-- Consumed events with their outcome per webhook. `routes` maps every webhook
-- configured at coalescing time to either the payload id (a number) that
-- carries the event, or a string: the check that excluded it, or 'collapsed'.
-- One jsonb per event keeps many events times many webhooks compact.
-- Events written by a backfill have no outbox row and no coalescing run: seq
-- and run_id are null and backfill_id names the backfill. Every captured event
-- has seq and run_id and a null backfill_id.
create table asset_webhooks.events (
  event_id        uuid primary key,
  seq             bigint,
  occurred_at     timestamptz not null,
  event_type      text not null,
  asset_id        bigint not null,
  asset_uuid      uuid,
  -- atomId as delivered: for EDITED the asset's latest atom at coalescing time.
  atom_id         bigint,
  run_id          bigint,
  coalesced_at    timestamptz not null,
  collapsed_into  uuid,
  routes          jsonb not null,
  backfill_id     bigint
);
-- Investigation by time and by asset; retention by coalesced_at.
create index events_occurred_at on asset_webhooks.events (occurred_at);
create index events_asset on asset_webhooks.events (asset_id, occurred_at);
create index events_coalesced_at on asset_webhooks.events (coalesced_at);
-- The events of one backfill (sql/runbooks/backfills.sql). Partial: captured
-- events, nearly all of them, get no entry.
create index events_backfill on asset_webhooks.events (backfill_id) where backfill_id is not null;

-- One row per event and webhook it was routed to, with what became of it.
-- backfill_id is non-null for an event written by a backfill, which has a
-- route to its one webhook only.
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
       e.coalesced_at,
       e.backfill_id
from asset_webhooks.events e
cross join lateral jsonb_each(e.routes) r
left join asset_webhooks.payloads p
  on p.payload_id = case when jsonb_typeof(r.value) = 'number' then (r.value)::bigint end;

-- The payloads that will not be sent again unless an operator redelivers them.
-- Listing event_ids costs a TOAST fetch per row (they are stored out of line).
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
comment on view asset_webhooks.dead_letters is
  'One row per dead-lettered payload. reason: rejected, retries_exhausted, expired, too_large or webhook_removed; '
  'redeliver with: asset-webhooks dead-letters redeliver PAYLOAD_ID [--to WEBHOOK_ID]';

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
-- payloads, up to its concurrency minus those already in flight. Called after
-- coalescing, after a redelivery, when a webhook is enabled or resumed and by
-- maintenance. The advisory lock serialises pumps of one webhook so two
-- callers cannot both fill the slots.
--
-- The UPDATE asks `not dispatched` again: a settle may have just taken one of
-- the selected payloads into its chain (PostgreSQL re-checks only the UPDATE's
-- own conditions once the row lock it waited for is released), and such a
-- payload must not get a job of its own while the chain's request for it is
-- out. With concurrency above 1 rows another transaction holds are skipped,
-- so the slot goes to the next waiting payload; with concurrency 1 the head is
-- waited for, to keep the order.
--
-- Its statements are planned at each call: plans kept for the connection
-- (PL/pgSQL keeps a generic plan after five calls) would be those made when
-- the table was empty or small, and read it whole as it grows. It is called
-- per webhook per coalescing chunk, per pump and per maintenance pass, never
-- per payload, so planning costs little.
-- graphile_worker.add_job is resolved at call time (see enqueue_delivery).
create function asset_webhooks.dispatch(p_webhook_id text) returns integer
language plpgsql
-- Planned afresh at each call (see above).
set plan_cache_mode = force_custom_plan
as $$
declare
  v_slots integer;
  v_in_order boolean;
  v_next bigint[];
  v_started integer := 0;
  r record;
begin
  perform pg_advisory_xact_lock(hashtextextended('asset_webhooks.dispatch:' || p_webhook_id, 0));
  select w.concurrency - (select count(*) from asset_webhooks.payloads p
                          where p.webhook_id = p_webhook_id and p.status = 'pending' and p.dispatched),
         w.concurrency = 1
    into v_slots, v_in_order
  from asset_webhooks.webhooks w
  where w.webhook_id = p_webhook_id and w.enabled and w.paused_since is null;
  if v_slots is null or v_slots <= 0 then
    return 0;
  end if;
  if v_in_order then
    v_next := array(select q.payload_id from asset_webhooks.payloads q
                    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
                    order by q.payload_id + 0 limit v_slots);
  else
    v_next := array(select q.payload_id from asset_webhooks.payloads q
                    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
                    order by q.payload_id + 0 limit v_slots for update skip locked);
  end if;
  for r in
    update asset_webhooks.payloads p set dispatched = true
    where p.payload_id = any(v_next) and p.status = 'pending' and not p.dispatched
    returning p.payload_id, p.series, p.attempts, p.next_attempt_at
  loop
    perform asset_webhooks.enqueue_delivery(r.payload_id, r.series, r.attempts + 1, coalesce(r.next_attempt_at, now()));
    v_started := v_started + 1;
  end loop;
  return v_started;
end $$;

-- Takes the webhook's next pending payload for a slot that just became free
-- and marks it dispatched; null when there is none. None when the webhook is
-- disabled, paused or already at its concurrency; SKIP LOCKED so concurrent finishers
-- take different payloads, except with concurrency 1, where the head is waited
-- for so strict order holds.
-- With p_start_at, a payload that may be sent at once (it is due: not waiting
-- for a retry time, and its series has not expired p_expire_after_seconds
-- after it started) also has its next attempt counted as started then, in the
-- same row update. Otherwise it gets a job as from hand_off, which waits or
-- dead-letters it. Written out rather than calling a SQL helper: a call from
-- plpgsql costs as much as the rest of the function.
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
  select w.concurrency into v_limit from asset_webhooks.webhooks w
  where w.webhook_id = p_webhook_id and w.enabled and w.paused_since is null;
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

-- The handoff: a delivery that just ended (delivered or dead-lettered, in the
-- same transaction) passes its slot to the webhook's next pending payload.
-- No lock on the webhook is needed: the ending payload stops counting and the
-- next one starts counting in one commit, so anyone counting sees the same
-- number in flight before and after. The rules are take_next's.
create function asset_webhooks.hand_off(p_webhook_id text) returns integer
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

-- Records the result of an attempt and applies the payload's next state, as
-- decided by the service's retry policy (src/delivery/policy/next-state.ts),
-- in one statement. The payload is locked and checked first: if an operator
-- acted meanwhile (a new series) or the attempt is no longer the payload's
-- latest, only the attempt's result is recorded (outcome 'retry') and
-- `applied` is false.
--   p_outcome: delivered | retry | rejected | retries_exhausted | expired
-- With p_chain, a final outcome takes the webhook's next payload and, when it
-- is due and not expired (p_expire_after_seconds after its series started),
-- records its attempt as started and returns it (next_*): the delivery job
-- goes on with it instead of adding a job for it (a delivery chain). A next
-- payload that is not due or expired gets a job as from hand_off, which
-- handles both. A chained payload has no job of its own while it is in
-- flight; if its worker dies, maintenance finds it dispatched without a live
-- job and hands it back (src/maintenance/maintenance.ts).
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
-- webhook was disabled, paused or removed by a reload the database had not seen yet):
-- the payload goes back to the pump as it was.
create function asset_webhooks.abandon_attempt(p_payload_id bigint, p_series integer, p_attempt integer) returns void
language sql as $$
  delete from asset_webhooks.attempts
  where payload_id = p_payload_id and series = p_series and attempt_no = p_attempt and outcome is null;
  update asset_webhooks.payloads set attempts = p_attempt - 1, dispatched = false
  where payload_id = p_payload_id and series = p_series and attempts = p_attempt and status = 'pending';
$$;

-- Settles the results of several attempts in one statement: the service
-- gathers the results that finish while its previous batch is being written
-- (src/delivery/settle-batcher.ts). One row per result, `idx` being its
-- position (from 1) in the arrays.
--
-- The results that make up a busy service's batches (a final outcome whose
-- job goes on with its webhook's next payload: `chain`) are settled together:
-- one statement records their attempts, one their payloads, and per webhook
-- one statement counts its payloads in flight and one takes and starts its
-- next payloads. Every other result (a retry, no chain, a payload named twice
-- in the batch) is settled by settle_attempt, one at a time in payload_id
-- order, after the set.
--
-- The outcome is the same as settling each result alone in payload_id order:
--   * every payload of the batch is locked first, in payload_id order, so two
--     batches cannot deadlock on them;
--   * a webhook's chained results free their slots, then take at most that
--     many of its next payloads, fewer if the webhook is over its concurrency
--     (what the results alone would have taken, one slot at a time), none
--     when it is disabled or paused; with concurrency 1 the head is waited for rather
--     than skipped, so strict order holds;
--   * the n-th of a webhook's chained results (by payload_id) gets its n-th
--     next payload (by payload_id); a next payload that is not due or whose
--     series has expired is not started but gets a job, as from hand_off.
--
-- Every statement names the payloads it reads by their ids
-- (`payload_id = any(...)`), so it reads only those rows whatever plan the
-- table's statistics lead to, even while a long transaction keeps every
-- delivered payload's dead row in the table.
create function asset_webhooks.settle_attempts(
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
-- plans for the array parameters cost more to make than they save.
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
    select w.concurrency into v_limit from asset_webhooks.webhooks w
    where w.webhook_id = v_webhook and w.enabled and w.paused_since is null;
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

  -- The rest, one at a time, exactly as settle_attempt settles a result alone.
  for i in select o.i from unnest(p_payload_ids) with ordinality as o(payload_id, i)
           where not v_set[o.i] order by o.payload_id, o.i loop
    return query
      select i, s.applied, s.next_payload_id, s.next_webhook_id, s.next_series, s.next_attempt, s.next_series_started_at, s.next_body
      from asset_webhooks.settle_attempt(
        p_payload_ids[i], p_series[i], p_attempts[i], p_duration_ms[i], p_status_codes[i], p_error_classes[i], p_error_messages[i],
        p_excerpts[i], p_outcomes[i], p_at[i], p_retry_at[i], p_chain[i], p_expire_after_seconds[i]) as s;
  end loop;
end $$;

comment on column asset_webhooks.payloads.dead_letter_reason is
  'rejected (a 4xx), retries_exhausted, expired (deadLetterAfterSeconds after the series started), '
  'too_large (one event over maxPayloadBytes), webhook_removed (the webhook left the configuration of every running run process)';

-- The webhooks in the configuration of each running `run` process, written
-- by record_configuration. A row lives as long as its process's lease
-- (asset_webhooks.process_gone); rows of gone processes are removed by the
-- next recording.
create table asset_webhooks.process_configurations (
  process_id   text primary key,
  webhook_ids  text[] not null,
  recorded_at  timestamptz not null default now()
);

-- Records the webhooks of one `run` process's configuration (at its start, at
-- every reload and before every coalescing run it makes) and dead-letters,
-- with reason webhook_removed, the pending payloads of every recorded webhook
-- that is in no running process's configuration. Returns those webhooks with
-- the number of payloads dead-lettered now.
--
-- The rule is "in no running process's configuration", not "absent from the
-- configuration being recorded": during a rolling change, processes with the
-- old and the new document run side by side, and each would otherwise take
-- the other's webhooks for removed and dead-letter payloads that the other is
-- sending. A webhook that is configured but disabled is not removed: its
-- payloads wait, and expire. Payloads still `open` belong to a coalescing run
-- in progress and are left to it; the next recording catches them once sealed.
-- A stop with an unchanged document removes nothing: its lease ends, and the
-- next process to start records the same webhooks.
--
-- Recordings are serialised, so one never decides on a snapshot that misses
-- another's row that is being written.
create function asset_webhooks.record_configuration(p_process_id text, p_webhook_ids text[])
returns table (webhook_id text, dead_lettered integer)
language plpgsql as $$
begin
  perform pg_advisory_xact_lock(hashtextextended('asset_webhooks.record_configuration', 0));
  insert into asset_webhooks.process_configurations as c (process_id, webhook_ids)
  values (p_process_id, p_webhook_ids)
  on conflict (process_id) do update set webhook_ids = excluded.webhook_ids, recorded_at = now();
  delete from asset_webhooks.process_configurations c
  where c.process_id <> p_process_id and asset_webhooks.process_gone(c.process_id);
  return query
  with removed as (
    select w.webhook_id from asset_webhooks.webhooks w
    where not exists (select 1 from asset_webhooks.process_configurations c where w.webhook_id = any (c.webhook_ids))
  ),
  dead as (
    update asset_webhooks.payloads p
    set status = 'dead_lettered', dead_letter_reason = 'webhook_removed', dead_lettered_at = clock_timestamp(),
        dispatched = false, next_attempt_at = null
    from removed r
    where p.webhook_id = r.webhook_id and p.status = 'pending'
    returning p.webhook_id
  )
  select d.webhook_id, count(*)::integer from dead d group by d.webhook_id order by d.webhook_id;
end $$;
