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

-- This installation: one row, written by the migration that creates the
-- schema. installation_id is random, so two databases migrated separately
-- (two installations, or one rebuilt from scratch) never share it, while a
-- copy of a database (a restored backup, CREATE DATABASE ... TEMPLATE) keeps
-- it together with the payloads it holds. Payload ids start again in every
-- database; a signed delivery's webhook-id names the payload within its
-- installation (src/delivery/http/signing.ts), so receivers that deduplicate
-- on it never take one installation's payload for another's.
create table asset_webhooks.installation (
  singleton        boolean primary key default true check (singleton),
  installation_id  text not null default substr(md5(gen_random_uuid()::text), 1, 16),
  created_at       timestamptz not null default now()
);
insert into asset_webhooks.installation default values;

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
  updated_at   timestamptz not null default now(),
  -- A webhook's delivery health, shared by every process. failing_since: the
  -- first failed attempt (timeout, connection error, 5xx, a retried 4xx) since
  -- the last answer that was not a failure; while set, the webhook has at most
  -- one attempt in flight. hold_until: a receiver's Retry-After; no payload of
  -- the webhook is claimed before it.
  failing_since timestamptz,
  hold_until    timestamptz
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
  created_at  timestamptz not null default now(),
  -- The outcome of the tick's coalescing run, for readiness: finished_at when
  -- it succeeded, error (one line) when its last try failed.
  finished_at timestamptz,
  error       text
);
create index ticks_created_at on asset_webhooks.ticks (created_at);

-- A payload: the exact bytes that every attempt sends. `open` payloads are
-- still being filled by a running coalescing run and are never dispatched.
-- Each `run` process's delivery pump (src/delivery/pump.ts) claims due
-- payloads with claim_payloads; every change of a payload's state after that
-- goes through transition_payloads.
-- The state of a pending payload in its webhook's queue:
--   not dispatched                          waiting in the queue (next_attempt_at, when set, is the
--                                           earliest time it may be sent);
--   dispatched, next_attempt_at set         holds one of its webhook's `concurrency` slots and waits
--                                           for its retry at next_attempt_at;
--   dispatched, next_attempt_at null        in flight: its attempt row (series, attempts) has no
--                                           outcome yet, and names the process that sent it.
-- With concurrency 1 the single slot therefore keeps strict order: the next
-- payload is not claimed before the previous one is delivered or dead-lettered.
create table asset_webhooks.payloads (
  payload_id          bigint generated always as identity primary key,
  webhook_id          text not null,
  run_id              bigint,
  created_at          timestamptz not null default clock_timestamp(),
  status              text not null default 'open'
                      check (status in ('open', 'pending', 'delivered', 'dead_lettered')),
  -- true while the payload holds one of its webhook's slots (see above).
  dispatched          boolean not null default false,
  -- The exact bytes every attempt sends; empty while `open`, and empty when
  -- body_of names the payload that holds the same bytes.
  body                text not null,
  -- A coalescing run that packs the same events at the same time for several
  -- webhooks (identical filters: several receivers of everything, say) stores
  -- their body once, on the first of those payloads; the others name it here.
  -- That payload is kept as long as any payload names it (retention).
  body_of             bigint,
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

-- A coalescing run writes every routed event's JSON once per distinct body
-- (see body_of); lz4 compresses it at a fraction of pglz's cost. A server built
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
-- only this index provides, and claim_payloads orders by the same
-- expression: the primary key cannot serve their `order by ...
-- limit n` without sorting, so the planner never walks it from its start
-- over every payload already delivered (statistics taken while one webhook's
-- whole backlog waited would otherwise lead it there).
create index payloads_queue on asset_webhooks.payloads (webhook_id, (payload_id + 0))
  where status = 'pending' and not dispatched;
-- Expiry of waiting payloads (the recovery sweep, src/delivery/recover.ts).
create index payloads_expiry on asset_webhooks.payloads (series_started_at) where status = 'pending' and not dispatched;
-- Sealing the payloads a coalescing run left open (at the start of every run).
create index payloads_open on asset_webhooks.payloads (webhook_id) where status = 'open';
-- Retention keeps a payload whose body others name (body_of) until they are gone.
create index payloads_body_of on asset_webhooks.payloads (body_of) where body_of is not null;
-- `dead-letters` without --webhook: the newest first.
create index payloads_dead_newest on asset_webhooks.payloads (dead_lettered_at) where status = 'dead_lettered';

-- A `run` process holds a session advisory lock keyed by its id (its lease)
-- on a connection of its own for as long as it lives (src/service/process-lease.ts).
-- When the process dies, PostgreSQL ends its sessions and frees the lock, so
-- crash recovery can tell a live process's slow attempt from a dead process's
-- orphan and close the orphan's attempt at once.
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
-- in short transactions (orphaned_attempts, trace, the runbook).
create function asset_webhooks.process_gone(p_process_id text) returns boolean
language sql volatile
as $$ select pg_try_advisory_xact_lock(asset_webhooks.process_lease_key(p_process_id)) $$;

-- Every delivery attempt. The row is written before the request is sent, so a
-- crash mid-attempt leaves a row without a result (outcome null) rather than
-- no row. A standby's row (see claim_payloads) is written when it is claimed,
-- before it is known whether it will be sent at all: `sent` says so.
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
  -- application_name records null; crash recovery then closes such an
  -- attempt only once it is old (orphaned_attempts, src/delivery/recover.ts).
  process_id        text default asset_webhooks.process_of_session(),
  -- False for a standby claimed and not yet reported sent (by the process's
  -- next settle_and_claim after it sent it, or by its own result). Crash
  -- recovery undoes such an attempt instead of closing it: a request that
  -- never left its process is not an attempt.
  sent              boolean not null default true,
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

-- One configuration the coalescer routed by: its webhooks, in configuration
-- order, each with what its checks read. A configuration is stored once
-- (digest: of the webhooks' ids and definitions); runs with the same
-- configuration share it.
create table asset_webhooks.routings (
  routing_id    bigint generated always as identity primary key,
  digest        text not null unique,
  created_at    timestamptz not null default clock_timestamp(),
  -- Set by every chunk coalesced with it: no event refers to a routing whose
  -- last use is older than the oldest event kept (see src/maintenance/maintenance.ts).
  last_used_at  timestamptz not null default clock_timestamp()
);

-- position counts from 1 in configuration order; definition is
-- {"enabled", "resourceTypes", "eventTypes", "filters"} as the configuration
-- document gives them after defaults (src/config/schema.ts).
create table asset_webhooks.routing_webhooks (
  routing_id  bigint not null references asset_webhooks.routings (routing_id) on delete cascade,
  position    integer not null,
  webhook_id  text not null,
  definition  jsonb not null,
  primary key (routing_id, position),
  unique (routing_id, webhook_id)
);

-- Consumed events. What an event stores follows the webhooks that receive it,
-- not the webhooks configured: once, what routing saw (the configuration it
-- was routed by, routing_id, and the asset values the checks read), and for
-- the webhooks that receive it the payload that carries it. For every other
-- webhook of the routing the outcome is `collapsed` or `excluded`, and the
-- excluding check is derived when asked, by evaluating the stored definition
-- against the stored values (asset_webhooks.excluding_check). Nothing is
-- written per excluded webhook.
-- Events written by a backfill have no outbox row and no coalescing run: seq
-- and run_id are null and backfill_id names the backfill; their routing holds
-- the backfill's one webhook, which receives them. Every captured event has
-- seq and run_id and a null backfill_id.
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
  -- No foreign key: the coalescer writes it from the routing it recorded at
  -- the start of its run, and a key would cost an index probe per event.
  routing_id      bigint,
  -- The routing positions of the webhooks that receive the event, and in the
  -- same order the payloads that carry it to them; null when none does.
  delivered_to    integer[],
  payload_ids     bigint[],
  -- What routing saw: the asset was gone by coalescing time, else its values
  -- as the checks read them (src/filters/compile.ts). Empty lists are stored
  -- as null. The supertype and parent are always stored; state, schema, type,
  -- domain, keywords and additional fields only as far as some enabled
  -- webhook's filters of the routing read them, so a value no check of the
  -- routing reads may be null. Collapsed and PURGED events store no values:
  -- no check reads them.
  asset_gone      boolean not null default false,
  seen_supertype  text,
  seen_parent_id  bigint,
  seen_state      text,
  seen_schema_id  bigint,
  seen_type_id    bigint,
  seen_domain_id  bigint,
  seen_keywords   text[],
  seen_field_names  text[],
  seen_field_values text[],
  backfill_id     bigint
);
-- Investigation by time and by asset; retention by coalesced_at.
create index events_occurred_at on asset_webhooks.events (occurred_at);
create index events_asset on asset_webhooks.events (asset_id, occurred_at);
create index events_coalesced_at on asset_webhooks.events (coalesced_at);
-- The events of one backfill (sql/runbooks/backfills.sql). Partial: captured
-- events, nearly all of them, get no entry.
create index events_backfill on asset_webhooks.events (backfill_id) where backfill_id is not null;

-- The check that excludes the event from a webhook with this definition, in
-- this order, or null when the webhook receives it: disabled (even
-- PURGED); a PURGED event passes from here on; asset_gone; resource_type;
-- event_type; parent (only top-level assets, unless a parentId filter is
-- configured); then each filter group, `filter:<n>` counting from 1. A value
-- list is a set: AND needs every listed value present, ANY one, NONE none;
-- matching is exact. `collapsed` is decided before any of these and is not
-- named here. It agrees with the coalescer's evaluation
-- (src/filters/compile.ts); a property test checks that on random cases.
create function asset_webhooks.excluding_check(p_definition jsonb, p_event asset_webhooks.events) returns text
language plpgsql stable as $$
declare
  v_group jsonb;
  v_n integer := 0;
  v_listed text[];
  v_values text[];
  v_passes boolean;
begin
  if not (p_definition ->> 'enabled')::boolean then
    return 'disabled';
  end if;
  if p_event.event_type = 'PURGED' then
    return null;
  end if;
  if p_event.asset_gone then
    return 'asset_gone';
  end if;
  if p_event.seen_supertype is null or not (p_definition -> 'resourceTypes') ? p_event.seen_supertype then
    return 'resource_type';
  end if;
  if not (p_definition -> 'eventTypes') ? p_event.event_type then
    return 'event_type';
  end if;
  if p_event.seen_parent_id is not null and not p_definition @? '$.filters[*] ? (@.filterKind == "parentId")' then
    return 'parent';
  end if;
  for v_group in select g from jsonb_array_elements(p_definition -> 'filters') as g loop
    v_n := v_n + 1;
    v_listed := array(select jsonb_array_elements_text(v_group -> 'value'));
    v_values := case v_group ->> 'filterKind'
      when 'keywords' then coalesce(p_event.seen_keywords, '{}')
      when 'additionalFields' then
        case when v_group ? 'fieldName' then
          array(select f.value from unnest(p_event.seen_field_names, p_event.seen_field_values) as f(name, value)
                where f.name = v_group ->> 'fieldName')
        else coalesce(p_event.seen_field_values, '{}') end
      when 'state' then array_remove(array[p_event.seen_state], null)
      when 'schemaId' then array_remove(array[p_event.seen_schema_id::text], null)
      when 'typeId' then array_remove(array[p_event.seen_type_id::text], null)
      when 'domainId' then array_remove(array[p_event.seen_domain_id::text], null)
      when 'parentId' then array[coalesce(p_event.seen_parent_id::text, 'null')]
    end;
    v_passes := case v_group ->> 'condition'
      when 'AND' then v_listed <@ v_values
      when 'ANY' then v_listed && v_values
      else not (v_listed && v_values)
    end;
    if not v_passes then
      return 'filter:' || v_n;
    end if;
  end loop;
  return null;
end $$;

-- One row per event and webhook of the configuration it was routed by. The
-- excluding check is derived only for the rows that ask for it: counting
-- outcomes reads no definition. backfill_id is non-null for an event written
-- by a backfill.
create view asset_webhooks.event_outcomes as
select e.event_id,
       e.event_type,
       e.asset_id,
       e.asset_uuid,
       e.occurred_at,
       w.webhook_id,
       case
         when e.collapsed_into is not null then 'collapsed'
         when d.pos is null then 'excluded'
         else case p.status when 'delivered' then 'delivered' when 'dead_lettered' then 'dead_lettered' else 'pending' end
       end as outcome,
       case when e.collapsed_into is null and d.pos is null then asset_webhooks.excluding_check(w.definition, e) end as excluded_by,
       p.payload_id,
       e.collapsed_into,
       e.atom_id,
       e.coalesced_at,
       e.backfill_id
from asset_webhooks.events e
join asset_webhooks.routing_webhooks w on w.routing_id = e.routing_id
cross join lateral (select array_position(e.delivered_to, w.position) as pos) d
left join asset_webhooks.payloads p on p.payload_id = e.payload_ids[d.pos];

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







-- A series' start as the retry policy reads it: to the millisecond, rounded
-- up. The policy (src/delivery/policy/next-state.ts) counts the delivery
-- window from it in a JavaScript Date, which keeps milliseconds, where the
-- database keeps microseconds. Read rounded down, the policy's window would
-- end up to a millisecond before the database's: a retry due at its end
-- could then be claimed and its failure dead-lettered as expired before
-- deadLetterAfterSeconds had passed. Rounded up, the policy's window ends at
-- the database's or within a millisecond after it, and the database's exact
-- checks (the claim's, the expiry sweep's) decide in between.
create function asset_webhooks.series_start_as_read(p_started_at timestamptz) returns timestamptz
language sql stable parallel safe as $$
  select date_trunc('milliseconds', p_started_at + interval '999 microseconds')
$$;

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
-- Standby: for the webhooks named in p_standby_for (those the caller has
-- requests open to), up to p_standby payloads more than the concurrency are
-- claimed and returned with standby = true: their attempts are started, not
-- yet sent (attempts.sent false), and the caller sends one only when one of
-- its own requests to that webhook has ended and that request's result is not
-- yet written, and says so in its next settle_and_claim (or undoes it with
-- a given_back transition). Counting rows in flight this way never lets a receiver
-- see more than its concurrency of requests at once: a row claimed while the
-- webhook has its concurrency in flight is a standby, and a standby replaces a
-- request that has ended but still counts until its result is written. No
-- standby is claimed with concurrency 1 (strict order: the next payload waits
-- for the previous one's delivery) or while failing_since is set.
--
-- Safe across processes: a webhook is claimed by one transaction at a time
-- (a try-lock: a webhook being claimed elsewhere is skipped, not waited for),
-- and payloads another transaction holds (a coalescing chunk) are skipped;
-- with concurrency 1 only the head itself may be claimed, so strict order holds.
create function asset_webhooks.claim_payloads(p_now timestamptz, p_max integer, p_share integer, p_after text,
                                              p_expire_after_seconds integer,
                                              p_standby integer default 0, p_standby_for text[] default '{}')
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz,
               body text, standby boolean)
language plpgsql
-- Planned at each call: a plan kept for the life of a session would keep the
-- table's size from when it was made (a `run` process's connections live for
-- days, from an empty table to millions of rows), while each new plan reads
-- the table's size as it is now.
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
  v_all bigint[] := '{}';
  -- Per visited webhook that got payloads: how many may be sent at once now.
  v_webhooks text[] := '{}';
  v_sendable integer[] := '{}';
begin
  -- Only webhooks that had a free slot and a payload for it when this
  -- statement began are visited: one statement over the configured webhooks,
  -- however many are idle or full, instead of several per webhook. It only
  -- filters: each visited webhook's slots are counted again under its lock.
  for w in
    -- sendable: requests that may be open at once; slots: attempts that may
    -- be started, standbys included.
    select k.webhook_id, k.concurrency, l.sendable, l.slots, l.retry_due
    from asset_webhooks.webhooks k
    cross join lateral (select case when k.failing_since is not null then 1 else k.concurrency end as sendable) s
    cross join lateral (
      select s.sendable,
             s.sendable + case when k.failing_since is null and k.concurrency > 1 and k.webhook_id = any(p_standby_for)
                               then greatest(p_standby, 0) else 0 end as slots,
             exists (select 1 from asset_webhooks.payloads r
                     where r.webhook_id = k.webhook_id and r.status = 'pending' and r.dispatched
                       and r.next_attempt_at <= p_now) as retry_due) l
    -- A paused webhook's payloads, retries included, wait for its resume.
    where k.enabled and k.paused_since is null and (k.hold_until is null or k.hold_until <= p_now)
      and (select count(*) from asset_webhooks.payloads f
           where f.webhook_id = k.webhook_id and f.status = 'pending' and f.dispatched and f.next_attempt_at is null)
          < l.slots
      and (l.retry_due
           or exists (select 1 from asset_webhooks.payloads h
                      where h.webhook_id = k.webhook_id and h.status = 'pending' and not h.dispatched))
    order by k.webhook_id <= coalesce(p_after, ''), k.webhook_id
  loop
    exit when v_claimed >= p_max;
    continue when not pg_try_advisory_xact_lock(hashtextextended('asset_webhooks.claim:' || w.webhook_id, 0));
    select count(*) filter (where p.next_attempt_at is null), count(*) into v_in_flight, v_held
    from asset_webhooks.payloads p
    where p.webhook_id = w.webhook_id and p.status = 'pending' and p.dispatched;
    v_take := least(w.slots - v_in_flight, p_share, p_max - v_claimed);
    continue when v_take <= 0;
    -- Retries come due only with time: one that was not due when this
    -- statement began is left to the next claim, and its query is skipped.
    v_ids := case when w.retry_due then
               array(select q.payload_id from asset_webhooks.payloads q
                     where q.webhook_id = w.webhook_id and q.status = 'pending' and q.dispatched
                       and q.next_attempt_at <= p_now and p_now < q.series_started_at + v_window
                     order by q.payload_id limit v_take for update skip locked)
             else '{}' end;
    -- Waiting retries hold slots of the concurrency, not of the failing limit.
    v_room := least(v_take - cardinality(v_ids), greatest(w.slots, w.concurrency) - v_held);
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
    -- Counted whether due or not: p_max bounds requests, and a payload that
    -- waits in its slot for its retry time takes none, so this errs low.
    v_all := v_all || v_ids;
    v_claimed := v_claimed + cardinality(v_ids);
    v_webhooks := v_webhooks || w.webhook_id;
    v_sendable := v_sendable || (w.sendable - v_in_flight);
  end loop;
  -- One statement starts every attempt chosen above (their rows are locked):
  -- its cost is per payload, not per webhook. In the order chosen, so the
  -- last row names the webhook the next call's turn starts after. A
  -- webhook's started attempts beyond what it may send now are standbys.
  return query
    with due as (
      select q.payload_id, coalesce(q.next_attempt_at, p_now) <= p_now as due, o.ord
      from unnest(v_all) with ordinality as o(payload_id, ord)
      join asset_webhooks.payloads q on q.payload_id = o.payload_id
      where q.status = 'pending' and p_now < q.series_started_at + v_window
    ),
    claimed as (
      update asset_webhooks.payloads p
      set dispatched = true,
          attempts = case when d.due then p.attempts + 1 else p.attempts end,
          last_attempt_at = case when d.due then p_now else p.last_attempt_at end,
          next_attempt_at = case when d.due then null else p.next_attempt_at end
      from due d
      where p.payload_id = d.payload_id
      returning p.payload_id, p.webhook_id, p.series, p.attempts, p.series_started_at, d.due, d.ord,
                case when d.due then
                  case when p.body_of is null then p.body
                       else (select b.body from asset_webhooks.payloads b where b.payload_id = p.body_of) end
                end as body
    ),
    ranked as (
      select c.*, row_number() over (partition by c.webhook_id order by c.ord) > s.sendable as standby
      from claimed c
      join unnest(v_webhooks, v_sendable) as s(webhook_id, sendable) on s.webhook_id = c.webhook_id
      where c.due
    ),
    started as (
      insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at, sent)
      select r.payload_id, r.series, r.attempts, p_now, not r.standby from ranked r
    )
    select r.payload_id, r.webhook_id, r.series, r.attempts, asset_webhooks.series_start_as_read(r.series_started_at), r.body,
           r.standby
    from ranked r order by r.ord;
end $$;

-- One change of a payload's state, one row per change given to
-- transition_payloads: the one way a payload's state changes once its
-- coalescing run has sealed it. Named fields; each kind reads the ones listed
-- for it, the rest stay null. src/lifecycle/transitions.ts builds them for the
-- service and the CLI; record_configuration and the redelivery runbook build
-- theirs in SQL, by name (jsonb_populate_record).
--   kind              attempt_result   an attempt's result, as the retry policy decided its outcome
--                     interrupted      the same, for an attempt crash recovery closes (its process is gone)
--                     expiry           a payload not in flight dead-lettered as expired
--                     webhook_removed  a pending payload of a webhook in no running process's configuration
--                     redelivery       an operator sends a dead letter again, in a new series
--                     given_back       a claimed attempt that will not be made goes back to its queue
--                     pause_shift      a resumed webhook's payload: its window moves past the pause
--   payload_id        every kind
--   series            the series the caller saw: the change applies only to it. Null (webhook_removed,
--                     redelivery, pause_shift): the current series
--   attempt           attempt_result, interrupted, given_back: the attempt in flight it is about
--   outcome           attempt_result, interrupted: delivered | retry | rejected | retries_exhausted | expired
--   at                when it happened (delivered_at, dead_lettered_at); null: the statement's clock
--   retry_at          outcome retry: when the payload is sent again (it keeps its slot until then)
--   duration_ms, status_code, error_class, error_message, response_excerpt: the attempt's result
--   started_at        when the attempt's request was sent (a standby is sent after its claim); null: the claim's time
--   receiver_failed   what the attempt says of its receiver's health (webhooks.failing_since); null: nothing
--   hold_until        the receiver's Retry-After: no payload of the webhook is claimed before it
--   to_webhook_id     redelivery: the webhook the payload moves to; null: it stays with its webhook
--   requested_by      redelivery: who asked (asset_webhooks.redeliveries); null: current_user
--   paused_since      pause_shift: when the webhook's pause began
create type asset_webhooks.payload_transition as (
  kind             text,
  payload_id       bigint,
  series           integer,
  attempt          integer,
  outcome          text,
  at               timestamptz,
  retry_at         timestamptz,
  duration_ms      integer,
  status_code      integer,
  error_class      text,
  error_message    text,
  response_excerpt text,
  started_at       timestamptz,
  receiver_failed  boolean,
  hold_until       timestamptz,
  to_webhook_id    text,
  requested_by     text,
  paused_since     timestamptz
);

-- transition_payloads' answer to one transition: its position in the batch
-- (from 1), whether it applied and, when it did not, why (see transition_refusal).
create type asset_webhooks.transition_answer as (idx integer, applied boolean, reason text);

-- One attempt, by its key in asset_webhooks.attempts.
create type asset_webhooks.attempt_key as (payload_id bigint, series integer, attempt integer);

-- A payload claimed for an attempt, as claim_payloads returns it (settle_and_claim's `claimed`).
create type asset_webhooks.claimed_payload as (
  payload_id        bigint,
  webhook_id        text,
  series            integer,
  attempt           integer,
  series_started_at timestamptz,
  body              text,
  standby           boolean
);

-- A payload's state as the transitions read it: open, delivered,
-- dead_lettered, or for a pending payload (see asset_webhooks.payloads)
-- waiting (in its webhook's queue), retry_held (holding a slot until its
-- retry) or in_flight (its attempt started and not finished).
create function asset_webhooks.payload_state(p_status text, p_dispatched boolean, p_next_attempt_at timestamptz)
returns text
language sql immutable parallel safe as $$
  select case when p_status <> 'pending' then p_status
              when not p_dispatched then 'waiting'
              when p_next_attempt_at is not null then 'retry_held'
              else 'in_flight' end
$$;

-- Why a transition of kind p_kind does not apply to a payload in state
-- p_state (payload_state), or null when it does. p_attempt_current: the
-- transition's attempt is the payload's current one and has no outcome yet.
--   attempt_result, interrupted, given_back: in_flight, at that attempt
--   expiry:          waiting or retry_held (an attempt in flight settles by its result)
--   webhook_removed: waiting, retry_held or in_flight (an open payload belongs to its coalescing run)
--   redelivery:      dead_lettered
--   pause_shift:     open, waiting, retry_held or in_flight
-- An unknown kind is no refusal: transition_payloads raises on it (a caller's bug).
create function asset_webhooks.transition_refusal(p_kind text, p_state text, p_attempt_current boolean)
returns text
language sql immutable parallel safe as $$
  select case
    when p_kind in ('attempt_result', 'interrupted', 'given_back') then
      case when p_state <> 'in_flight' then 'not_in_flight'
           when not coalesce(p_attempt_current, false) then 'attempt_moved_on' end
    when p_kind = 'expiry' then
      case when p_state = 'in_flight' then 'in_flight'
           when p_state not in ('waiting', 'retry_held') then 'not_pending' end
    when p_kind = 'webhook_removed' then
      case when p_state = 'open' then 'still_open'
           when p_state not in ('waiting', 'retry_held', 'in_flight') then 'not_pending' end
    when p_kind = 'redelivery' then
      case when p_state <> 'dead_lettered' then 'not_dead_lettered' end
    when p_kind = 'pause_shift' then
      case when p_state not in ('open', 'waiting', 'retry_held', 'in_flight') then 'not_pending' end
  end
$$;

-- The one statement that changes payloads' states: every attempt's result
-- (crash recovery's interrupted included), an expiry, a removed webhook's
-- dead letters, an operator's redelivery (moved to another webhook or not),
-- a claimed attempt given back, a resumed webhook's pause shift. One answer
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
-- A retry keeps its slot (dispatched) until its time; a final outcome frees
-- it. receiver_failed and hold_until of the applied attempt results update
-- the webhook's health: the latest verdict of the batch wins (by `at`, then
-- by position), a failure keeps the first failure's time, and hold_until only
-- moves later. A redelivery starts a new series (series_started_at now, no
-- attempts) and records it in asset_webhooks.redeliveries. A pause shift
-- moves series_started_at forward by the time the payload spent paused
-- (a payload created during the pause starts its window now).
create function asset_webhooks.transition_payloads(p_transitions asset_webhooks.payload_transition[])
returns setof asset_webhooks.transition_answer
language plpgsql
-- Planned at each call, as claim_payloads.
set plan_cache_mode = force_custom_plan
as $$
declare
  v_refused text[];
  v_unknown text;
begin
  select coalesce(t.kind, 'null') into v_unknown from unnest(p_transitions) t
  where t.kind is null or t.kind not in ('attempt_result', 'interrupted', 'expiry', 'webhook_removed', 'redelivery',
                                         'given_back', 'pause_shift')
  limit 1;
  if found then
    raise exception 'asset_webhooks.transition_payloads: unknown transition kind %', v_unknown using errcode = '22023';
  end if;

  -- In payload order, so that concurrent batches never wait on each other in a cycle.
  perform 1 from unnest(p_transitions) t
  join asset_webhooks.payloads p on p.payload_id = t.payload_id
  order by p.payload_id for update of p;

  select array_agg(case
           when not u.first then 'named_earlier_in_batch'
           when p.payload_id is null then 'no_such_payload'
           when u.series is not null and u.series <> p.series then 'series_moved_on'
           else asset_webhooks.transition_refusal(
                  u.kind, asset_webhooks.payload_state(p.status, p.dispatched, p.next_attempt_at),
                  p.attempts = u.attempt
                  and exists (select 1 from asset_webhooks.attempts a
                              where a.payload_id = p.payload_id and a.series = p.series
                                and a.attempt_no = u.attempt and a.outcome is null))
         end order by u.i)
  into v_refused
  from (select t.*, t.ordinality as i,
               row_number() over (partition by t.payload_id order by t.ordinality) = 1 as first
        from unnest(p_transitions) with ordinality t) u
  left join asset_webhooks.payloads p on p.payload_id = u.payload_id;

  -- Attempt results: recorded applied or not. One entry per attempt, its
  -- first: an UPDATE joined to several would take any one of them.
  update asset_webhooks.attempts a
  set duration_ms = r.duration_ms, status_code = r.status_code, error_class = r.error_class,
      error_message = r.error_message, response_excerpt = r.response_excerpt,
      outcome = case when v_refused[r.i] is null then r.outcome else 'retry' end,
      started_at = coalesce(r.started_at, a.started_at)
  from (select distinct on (t.payload_id, t.series, t.attempt) t.*, t.ordinality as i
        from unnest(p_transitions) with ordinality t
        where t.kind in ('attempt_result', 'interrupted')
        order by t.payload_id, t.series, t.attempt, t.ordinality) r
  where a.payload_id = r.payload_id and a.series = r.series and a.attempt_no = r.attempt and a.outcome is null;

  -- Attempt results and expiries that apply: the payload's next state.
  update asset_webhooks.payloads p
  set last_status_code = case when r.kind = 'expiry' then p.last_status_code else r.status_code end,
      last_error = case when r.kind = 'expiry' then p.last_error
                        when r.error_class is null then null
                        else r.error_class || ': ' || coalesce(r.error_message, '') end,
      status = case r.outcome when 'delivered' then 'delivered' when 'retry' then 'pending' else 'dead_lettered' end,
      delivered_at = case when r.outcome = 'delivered' then r.at end,
      dead_letter_reason = case when r.outcome not in ('delivered', 'retry') then r.outcome end,
      dead_lettered_at = case when r.outcome not in ('delivered', 'retry') then r.at end,
      dispatched = (r.outcome = 'retry'),
      next_attempt_at = case when r.outcome = 'retry' then coalesce(r.retry_at, r.at) end
  from (select t.kind, t.payload_id, t.status_code, t.error_class, t.error_message, t.retry_at, t.ordinality as i,
               case when t.kind = 'expiry' then 'expired' else t.outcome end as outcome,
               coalesce(t.at, clock_timestamp()) as at
        from unnest(p_transitions) with ordinality t
        where t.kind in ('attempt_result', 'interrupted', 'expiry')) r
  where v_refused[r.i] is null and p.payload_id = r.payload_id;

  -- Written only when it changes: a healthy webhook's row is not rewritten by every delivery.
  with verdicts as (
    select p.webhook_id, t.receiver_failed as failed, t.at, t.hold_until, t.ordinality as i
    from unnest(p_transitions) with ordinality t
    join asset_webhooks.payloads p on p.payload_id = t.payload_id
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

  update asset_webhooks.payloads p
  set status = 'dead_lettered', dead_letter_reason = 'webhook_removed',
      dead_lettered_at = coalesce(t.at, clock_timestamp()), dispatched = false, next_attempt_at = null
  from unnest(p_transitions) with ordinality t
  where v_refused[t.ordinality] is null and t.kind = 'webhook_removed' and p.payload_id = t.payload_id;

  with chosen as (
    select p.payload_id, coalesce(t.to_webhook_id, p.webhook_id) as webhook_id,
           case when t.to_webhook_id <> p.webhook_id then p.webhook_id end as moved_from,
           p.dead_letter_reason as previous_reason, coalesce(t.requested_by, current_user) as requested_by
    from unnest(p_transitions) with ordinality t
    join asset_webhooks.payloads p on p.payload_id = t.payload_id
    where v_refused[t.ordinality] is null and t.kind = 'redelivery'
  ),
  started as (
    update asset_webhooks.payloads p
    set webhook_id = c.webhook_id, status = 'pending', series = p.series + 1, series_started_at = clock_timestamp(),
        attempts = 0, dispatched = false, next_attempt_at = null, dead_letter_reason = null, dead_lettered_at = null
    from chosen c
    where p.payload_id = c.payload_id
    returning p.payload_id, p.series, c.requested_by, c.previous_reason, c.moved_from
  )
  insert into asset_webhooks.redeliveries (payload_id, series, requested_by, previous_reason, moved_from)
  select s.payload_id, s.series, s.requested_by, s.previous_reason, s.moved_from from started s;

  delete from asset_webhooks.attempts a
  using unnest(p_transitions) t
  where t.kind = 'given_back' and a.payload_id = t.payload_id and a.series = t.series and a.attempt_no = t.attempt
    and a.outcome is null;
  update asset_webhooks.payloads p
  set attempts = t.attempt - 1, dispatched = false,
      last_attempt_at = (select max(a.started_at) from asset_webhooks.attempts a where a.payload_id = p.payload_id)
  from unnest(p_transitions) with ordinality t
  where v_refused[t.ordinality] is null and t.kind = 'given_back' and p.payload_id = t.payload_id;

  update asset_webhooks.payloads p
  set series_started_at = p.series_started_at + (now() - greatest(p.series_started_at, t.paused_since))
  from unnest(p_transitions) with ordinality t
  where v_refused[t.ordinality] is null and t.kind = 'pause_shift' and p.payload_id = t.payload_id
    and p.series_started_at < now();

  return query
    select o.i::integer, v_refused[o.i] is null, v_refused[o.i]
    from generate_series(1, coalesce(cardinality(p_transitions), 0)) as o(i);
end $$;

-- transition_payloads, then claim_payloads, in one transaction and one round
-- trip: the slots the settled attempts free are taken again at once, by the
-- same rules and turns as any claim, without waiting for the caller's next
-- claim. p_claim_max 0 claims nothing. The claim never waits: its advisory
-- locks are try-locks and its row locks skip locked rows, so it adds no lock
-- wait to the settle.
--
-- One row of two arrays rather than a set of rows: `settled` holds
-- transition_payloads' answers in request order, `claimed` the payloads
-- claimed in claim order, each array of one type, so neither shape is padded
-- with the other's null columns; the caller reads `claimed` with unnest.
--
-- p_sent names standbys the caller has sent since its previous statement:
-- their attempts are marked sent first (see attempts.sent). That changes no
-- payload's state (the attempt was in flight already), so it is no transition.
create function asset_webhooks.settle_and_claim(
  p_transitions asset_webhooks.payload_transition[],
  p_now timestamptz, p_claim_max integer, p_claim_share integer, p_claim_after text, p_expire_after_seconds integer,
  p_standby integer default 0, p_standby_for text[] default '{}',
  p_sent asset_webhooks.attempt_key[] default '{}',
  out settled asset_webhooks.transition_answer[],
  out claimed asset_webhooks.claimed_payload[]
)
language plpgsql
as $$
begin
  update asset_webhooks.attempts a set sent = true
  from unnest(p_sent) as s
  where a.payload_id = s.payload_id and a.series = s.series and a.attempt_no = s.attempt and not a.sent;
  settled := array(select t from asset_webhooks.transition_payloads(p_transitions) t order by t.idx);
  claimed := '{}';
  if p_claim_max > 0 then
    claimed := array(
      select row(c.payload_id, c.webhook_id, c.series, c.attempt, c.series_started_at, c.body,
                 c.standby)::asset_webhooks.claimed_payload
      from asset_webhooks.claim_payloads(p_now, p_claim_max, p_claim_share, p_claim_after, p_expire_after_seconds,
                                         p_standby, p_standby_for) with ordinality c
      order by c.ordinality);
  end if;
end $$;

-- Attempts in flight whose process is gone: its lease is free (see
-- process_gone) and the attempt started more than p_grace_seconds before
-- p_now; or, for an attempt that names no process (a session named
-- otherwise), started more than p_nameless_after_seconds before. Crash
-- recovery closes them through transition_payloads as interrupted, or, when
-- `sent` is false (a standby never reported sent), undoes them with
-- a given_back transition. Call it in a transaction of its own: process_gone holds
-- each lease it finds free until the transaction ends.
create function asset_webhooks.orphaned_attempts(p_now timestamptz, p_grace_seconds integer, p_nameless_after_seconds integer)
returns table (payload_id bigint, webhook_id text, series integer, attempt integer, series_started_at timestamptz,
               sent boolean)
language sql volatile as $$
  select p.payload_id, p.webhook_id, p.series, p.attempts, asset_webhooks.series_start_as_read(p.series_started_at),
         a.sent
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
-- payloads_in_flight. A paused webhook's clock stands still: its payloads are
-- not expired while it is paused (the resume moves series_started_at forward).
create function asset_webhooks.expired_payloads(p_now timestamptz, p_expire_after_seconds integer, p_limit integer)
returns table (payload_id bigint, series integer)
language sql stable as $$
  (select p.payload_id, p.series from asset_webhooks.payloads p
   where p.status = 'pending' and not p.dispatched
     and p.series_started_at <= p_now - make_interval(secs => p_expire_after_seconds)
     and not exists (select 1 from asset_webhooks.webhooks w where w.webhook_id = p.webhook_id and w.paused_since is not null)
   order by p.series_started_at limit p_limit)
  union all
  (select p.payload_id, p.series from asset_webhooks.payloads p
   where p.status = 'pending' and p.dispatched and p.next_attempt_at is not null
     and p.series_started_at <= p_now - make_interval(secs => p_expire_after_seconds)
     and not exists (select 1 from asset_webhooks.webhooks w where w.webhook_id = p.webhook_id and w.paused_since is not null)
   limit p_limit)
$$;

comment on column asset_webhooks.payloads.dead_letter_reason is
  'rejected (a 4xx), retries_exhausted, expired (deadLetterAfterSeconds after the series started), '
  'too_large (one event over maxPayloadBytes), webhook_removed (the webhook left the configuration of every running run process)';

-- The webhooks in the configuration of each running `run` process, written
-- by record_configuration. A process deletes its row when it stops cleanly
-- (src/service/service.ts). A row whose process's lease is free
-- (asset_webhooks.process_gone) is removed by a recording once the lease has
-- stayed free for the grace crash recovery waits (see record_configuration).
create table asset_webhooks.process_configurations (
  process_id        text primary key,
  webhook_ids       text[] not null,
  recorded_at       timestamptz not null default now(),
  -- When a recording first found the process's lease free; null while it is
  -- held. Cleared by the next recording that finds the lease held, and by the
  -- process itself whenever it takes its lease again
  -- (src/service/process-lease.ts), so a free spell that ended is never
  -- added to a later one.
  lease_free_since  timestamptz
);

-- Records the webhooks of one `run` process's configuration (at its start, at
-- every reload and before every coalescing run it makes) and dead-letters,
-- with reason webhook_removed (transition_payloads), the pending payloads of every recorded webhook
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
-- A stop with an unchanged document removes nothing: the process deletes its
-- row, and the next process to start records the same webhooks.
--
-- A process whose lease is free without a clean stop counts as running until
-- its lease has stayed free for p_grace_seconds, the grace crash recovery
-- waits (src/delivery/recover.ts, processGoneGrace): a live process whose
-- lease connection was lost for a moment takes its lease back well within
-- it, and must not have its webhooks taken for removed meanwhile. With
-- p_grace_seconds null (the caller's own lease is not yet settled) no
-- process is taken for gone by its free lease.
--
-- Recordings are serialised, so one never decides on a snapshot that misses
-- another's row that is being written.
create function asset_webhooks.record_configuration(p_process_id text, p_webhook_ids text[],
                                                    p_grace_seconds integer default null)
returns table (webhook_id text, dead_lettered integer)
language plpgsql as $$
declare
  v_ids bigint[];
  v_webhooks text[];
begin
  perform pg_advisory_xact_lock(hashtextextended('asset_webhooks.record_configuration', 0));
  insert into asset_webhooks.process_configurations as c (process_id, webhook_ids)
  values (p_process_id, p_webhook_ids)
  on conflict (process_id) do update set webhook_ids = excluded.webhook_ids, recorded_at = now(), lease_free_since = null;
  -- Written only when it changes. process_gone holds each lease it finds free
  -- until this transaction ends: the process cannot take it back in between.
  update asset_webhooks.process_configurations c
  set lease_free_since = case when g.gone then now() end
  from (select o.process_id, asset_webhooks.process_gone(o.process_id) as gone
        from asset_webhooks.process_configurations o where o.process_id <> p_process_id) g
  where c.process_id = g.process_id and g.gone <> (c.lease_free_since is not null);
  delete from asset_webhooks.process_configurations c
  where c.process_id <> p_process_id and p_grace_seconds is not null
    and c.lease_free_since <= now() - make_interval(secs => p_grace_seconds);
  select coalesce(array_agg(p.payload_id order by p.payload_id), '{}'),
         coalesce(array_agg(p.webhook_id order by p.payload_id), '{}')
  into v_ids, v_webhooks
  from asset_webhooks.payloads p
  where p.status = 'pending'
    and exists (select 1 from asset_webhooks.webhooks w
                where w.webhook_id = p.webhook_id
                  and not exists (select 1 from asset_webhooks.process_configurations c
                                  where w.webhook_id = any (c.webhook_ids)));
  return query
  select v_webhooks[a.idx], count(*)::integer
  from asset_webhooks.transition_payloads(array(
         select jsonb_populate_record(null::asset_webhooks.payload_transition,
                                      jsonb_build_object('kind', 'webhook_removed', 'payload_id', i.payload_id))
         from unnest(v_ids) with ordinality as i(payload_id, n) order by i.n)) a
  where a.applied
  group by v_webhooks[a.idx] order by v_webhooks[a.idx];
end $$;
