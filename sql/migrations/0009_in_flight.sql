-- Delivery writes each fact once. Before this migration a payload delivered
-- at its first try was written three times (its row at the claim and at the
-- result, both non-HOT since `dispatched` and `status` sit in the predicates
-- of its queue indexes; its attempt row inserted, under a foreign-key check
-- that locks the payload, and then updated with the result).
--
-- Now:
-- - asset_webhooks.in_flight holds a payload's slot: one row from its claim
--   to its final outcome (in flight, a standby, or held for its retry). It is
--   inserted at the claim, before the request is sent (crash recovery reads
--   it, as it read the open attempt row), updated in place for a retry hold
--   or a standby's sending (nothing it indexes changes: HOT), and deleted at
--   the final outcome. Its live size is bounded by the webhooks' concurrency
--   and standbys, whatever the backlog.
-- - The payload's row is written by delivery once, at the final outcome (and
--   at each failed try, which records its count and last error). `dispatched`
--   goes: a payload holds a slot exactly when it has an in_flight row.
--   `next_attempt_at` goes to the in_flight row, the only place a retry
--   waits.
-- - asset_webhooks.attempt_log is the table that was attempts: one row per
--   attempt that has a result, inserted with it, no foreign key (retention
--   deletes a payload's attempts with it). The view asset_webhooks.attempts
--   keeps the former table's columns for readers: the log, and the attempts
--   in flight from in_flight.
--
-- Live state moves as it is: a payload in flight or held for a retry gets its
-- in_flight row from its open attempt (which leaves the log) or its retry
-- time; `payloads.attempts` now counts finished attempts, so an in-flight
-- payload's count drops by its open one. An open attempt of a payload that
-- no longer holds a slot (a late result never came) stays in the log,
-- outcome null, as before. A waiting payload with a retry time ahead (no
-- release writes one) becomes retry-held.
--
-- Rebuilds the two queue indexes of payloads over its pending rows: a scan of
-- the table that holds delivery and coalescing while it runs (CHANGELOG).

create table asset_webhooks.in_flight (
  payload_id      bigint primary key,
  webhook_id      text not null,
  series          integer not null,
  -- The attempt in flight, or, while next_attempt_at is set, the last one tried.
  attempt_no      integer not null,
  started_at      timestamptz not null,
  -- The run process that claimed it (default: the session's, set by
  -- sql/dependents/in_flight_process_id_default.sql), as attempts.process_id was.
  process_id      text,
  -- False for a standby claimed and not yet reported sent.
  sent            boolean not null default true,
  -- Set while the payload holds its slot waiting for its retry.
  next_attempt_at timestamptz
) with (fillfactor = 70);

-- A webhook's slots: counted at every claim (at most its concurrency and standbys).
create index in_flight_webhook on asset_webhooks.in_flight (webhook_id);

comment on table asset_webhooks.in_flight is
  'A payload''s slot of its webhook''s concurrency, from its claim to its final outcome: in flight, a standby, '
  'or held for its retry (next_attempt_at). Deleted at the final outcome.';

insert into asset_webhooks.in_flight (payload_id, webhook_id, series, attempt_no, started_at, process_id, sent,
                                      next_attempt_at)
select p.payload_id, p.webhook_id, p.series, p.attempts,
       coalesce(a.started_at, p.last_attempt_at, p.series_started_at), a.process_id, coalesce(a.sent, true),
       p.next_attempt_at
from asset_webhooks.payloads p
left join asset_webhooks.attempts a
  on a.payload_id = p.payload_id and a.series = p.series and a.attempt_no = p.attempts and a.outcome is null
where p.status = 'pending' and (p.dispatched or p.next_attempt_at is not null);

-- The attempts now in in_flight leave the log; a count of finished attempts.
delete from asset_webhooks.attempts a
using asset_webhooks.in_flight f
where a.payload_id = f.payload_id and a.series = f.series and a.attempt_no = f.attempt_no and a.outcome is null
  and f.next_attempt_at is null;
update asset_webhooks.payloads p set attempts = p.attempts - 1
from asset_webhooks.in_flight f
where p.payload_id = f.payload_id and f.next_attempt_at is null and p.attempts > 0;
-- A standby never sent is no attempt, wherever it was left.
delete from asset_webhooks.attempts a where a.outcome is null and not a.sent;

alter table asset_webhooks.attempts rename to attempt_log;
alter table asset_webhooks.attempt_log drop constraint attempts_payload_id_fkey;
alter table asset_webhooks.attempt_log drop column sent;
alter table asset_webhooks.attempt_log alter column process_id drop default;
alter index asset_webhooks.attempts_pkey rename to attempt_log_pkey;
comment on table asset_webhooks.attempt_log is
  'Every delivery attempt that has a result, inserted with it (outcome null: an attempt whose payload left its '
  'slot before its result came). No foreign key: retention deletes a payload''s attempts with it.';
comment on column asset_webhooks.attempt_log.process_id is
  'The run process that started the attempt (its lease: the row of asset_webhooks.session_locks named process: and its id); null when the session did not say';

create view asset_webhooks.attempts as
  select l.payload_id, l.series, l.attempt_no, l.started_at, l.duration_ms, l.status_code, l.error_class,
         l.error_message, l.response_excerpt, l.outcome, l.process_id, true as sent
  from asset_webhooks.attempt_log l
  union all
  select f.payload_id, f.series, f.attempt_no, f.started_at, null::integer, null::integer, null::text, null::text,
         null::text, null::text, f.process_id, f.sent
  from asset_webhooks.in_flight f
  where f.next_attempt_at is null;
comment on view asset_webhooks.attempts is
  'Every delivery attempt: those with a result (attempt_log) and those in flight (in_flight, outcome null).';

drop index asset_webhooks.payloads_in_flight;
drop index asset_webhooks.payloads_queue;
drop index asset_webhooks.payloads_expiry;
alter table asset_webhooks.payloads drop column dispatched, drop column next_attempt_at;
-- The head of a webhook's queue: its pending payloads, of which those holding
-- a slot (at most its concurrency and standbys) are passed over. Ordered by
-- `payload_id + 0`, as claim_payloads orders (see the baseline's comment).
create index payloads_queue on asset_webhooks.payloads (webhook_id, (payload_id + 0)) where status = 'pending';
-- Expiry (the recovery sweep): pending payloads by the start of their series.
create index payloads_expiry on asset_webhooks.payloads (series_started_at) where status = 'pending';
