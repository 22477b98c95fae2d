-- The schema asset_webhooks: the outbox that capture triggers write, the
-- events and payloads that coalescing makes of it, the attempts that delivery
-- records, and the views operators read. Its functions, and the objects that
-- call them, are not here: see sql/functions/README.md.
--
-- Data flows one way through these tables:
--   outbox --(coalesce: claim, collapse, route, pack)--> events + payloads --(deliver)--> attempts
--
-- `asset-webhooks migrate` runs this file in one transaction together with its
-- row in asset_webhooks.migrations (a table the migrator creates itself), then
-- the files of sql/functions and sql/dependents, then installs
-- graphile-worker's schema, then the binding (the view
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
-- run that holds the coalescing lock (a row of session_locks) claims or deletes them
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
  -- The key that eventIds mix seq with (sql/functions/event_id_of.sql): 62
  -- bits for the low half (the top two bits carry the UUID variant) and 12
  -- bits after the version digit. Never changed: every eventId derived so far
  -- was made with it.
  event_id_key     bigint not null
                   default ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint & 4611686018427387903,
  event_id_rand_a  text not null default substr(md5(gen_random_uuid()::text), 1, 3),
  created_at       timestamptz not null default now()
);
insert into asset_webhooks.installation default values;

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
  -- Its default, the database's clock as asset_webhooks.now() reads it, is set
  -- by sql/dependents/payloads_series_started_at_default.sql.
  series_started_at   timestamptz not null,
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
  -- Read from the session by default (asset_webhooks.process_of_session, set
  -- by sql/dependents/attempts_process_id_default.sql), so every statement
  -- that starts an attempt records it without restating it. A session with another
  -- application_name records null; crash recovery then closes such an
  -- attempt only once it is old (orphaned_attempts, src/delivery/recover.ts).
  process_id        text,
  -- False for a standby claimed and not yet reported sent (by the process's
  -- next settle_and_claim after it sent it, or by its own result). Crash
  -- recovery undoes such an attempt instead of closing it: a request that
  -- never left its process is not an attempt.
  sent              boolean not null default true,
  primary key (payload_id, series, attempt_no)
);
comment on column asset_webhooks.attempts.process_id is
  'The run process that started the attempt (its lease: the row of asset_webhooks.session_locks named process: and its id); null when the session did not say';

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
  backfill_id     bigint,
  -- The routing positions (a subset of delivered_to) of the mirror webhooks
  -- that got the event as an UNMATCHED, in place of its exclusion.
  unmatched_to    integer[],
  -- Events written by a reconcile: like a backfill's (no seq, no run), their
  -- routing holds the reconcile's one webhook; event_type EDITED or UNMATCHED.
  reconcile_id    bigint
);
-- Investigation by time and by asset; retention by coalesced_at.
create index events_occurred_at on asset_webhooks.events (occurred_at);
create index events_asset on asset_webhooks.events (asset_id, occurred_at);
create index events_coalesced_at on asset_webhooks.events (coalesced_at);
-- The events of one backfill (sql/runbooks/backfills.sql). Partial: captured
-- events, nearly all of them, get no entry.
create index events_backfill on asset_webhooks.events (backfill_id) where backfill_id is not null;
create index events_reconcile on asset_webhooks.events (reconcile_id) where reconcile_id is not null;

-- Mirror webhooks (`mirror: true`, docs/mirror.md): the assets the service
-- has announced to each one, so that it can tell the webhook when one stops
-- matching.
-- One row per asset some mirror webhook has been told about, kept when the
-- asset leaves every set (webhooks empty): last_event_at is what keeps one
-- asset's eventTimestamps rising for a webhook across leaving and coming
-- back. One row per asset rather than per webhook and asset: a chunk writes
-- one row for each asset it sends anything of, whatever the number of mirror
-- webhooks. Written by the coalescing chunk or reconcile chunk that routes
-- the event, in its transaction, under the coalescing lock: only one writer
-- at a time. Retention never deletes from it. Rewritten often: fillfactor
-- leaves room on each page for the new version of a row (a HOT update, no
-- new index entry).
create table asset_webhooks.mirror_members (
  asset_id       bigint primary key,
  -- For an UNMATCHED of an asset gone without its PURGED reaching a webhook.
  asset_uuid     uuid,
  -- The mirror webhooks whose set holds the asset: entered by a CREATED,
  -- EDITED, REVERSION or DELETED routed to the webhook, left by PURGED or
  -- UNMATCHED.
  webhooks       text[] not null,
  -- The eventTimestamp of the last event sent for the asset to any mirror
  -- webhook: the next one sent is later.
  last_event_at  timestamptz not null,
  changed_at     timestamptz not null default clock_timestamp()
) with (fillfactor = 80);

-- One row per reconcile of a mirror webhook. A chunk's payloads, events,
-- membership changes and the advance of its position commit in one
-- transaction, so an interrupted reconcile resumes after the last asset done,
-- and membership itself keeps an asset from being sent twice.
create table asset_webhooks.reconciles (
  reconcile_id    bigint generated always as identity primary key,
  webhook_id      text not null,
  -- The sha256 of the webhook's checks (resource types, event types,
  -- filters) the reconcile compares against.
  checks_digest   text not null,
  status          text not null default 'running' check (status in ('running', 'completed')),
  -- assets: walking the binding's assets; gone: the members whose asset no
  -- longer exists.
  phase           text not null default 'assets' check (phase in ('assets', 'gone')),
  -- Keyset position within the phase; null before its first chunk.
  last_asset_id   bigint,
  assets_read     bigint not null default 0,
  edited_sent     bigint not null default 0,
  unmatched_sent  bigint not null default 0,
  payloads        bigint not null default 0,
  requested_by    text not null,
  started_at      timestamptz not null default clock_timestamp(),
  updated_at      timestamptz not null default clock_timestamp(),
  finished_at     timestamptz
);
-- At most one unfinished reconcile per webhook: a second request resumes it.
create unique index reconciles_running on asset_webhooks.reconciles (webhook_id) where status = 'running';

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
--   at                when it happened (delivered_at, dead_lettered_at); null: asset_webhooks.now()
--   retry_in          outcome retry: the delay, from asset_webhooks.now(), before the payload is sent again
--                     (it keeps its slot until then); never past the end of its window
--   window_seconds    attempt_result, interrupted: retry.deadLetterAfterSeconds. A retry decided at or
--                     after series_started_at + window_seconds by asset_webhooks.now() is `expired`
--                     instead; null: no window
--   duration_ms, status_code, error_class, error_message, response_excerpt: the attempt's result
--   started_at        when the attempt's request was sent (a standby is sent after its claim); null: the claim's time
--   receiver_failed   what the attempt says of its receiver's health (webhooks.failing_since); null: nothing
--   hold_in           the receiver's Retry-After, as a delay from asset_webhooks.now() (never past the end
--                     of the payload's window): no payload of the webhook is claimed before it
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
  retry_in         interval,
  window_seconds   integer,
  duration_ms      integer,
  status_code      integer,
  error_class      text,
  error_message    text,
  response_excerpt text,
  started_at       timestamptz,
  receiver_failed  boolean,
  hold_in          interval,
  to_webhook_id    text,
  requested_by     text,
  paused_since     timestamptz
);

-- transition_payloads' answer to one transition: its position in the batch
-- (from 1), whether it applied and, when it did not, why (see transition_refusal);
-- for an attempt result that applied, the payload's outcome as written (a
-- retry decided past the window is `expired`).
create type asset_webhooks.transition_answer as (idx integer, applied boolean, reason text, outcome text);

-- One attempt, by its key in asset_webhooks.attempts.
create type asset_webhooks.attempt_key as (payload_id bigint, series integer, attempt integer);

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

