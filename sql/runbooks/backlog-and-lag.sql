-- Backlog and lag: is the service keeping up?
-- When: receivers report delays, or the outbox_oldest_age metric rises.
-- Usage: psql "$DATABASE_URL" -f sql/runbooks/backlog-and-lag.sql
\set ON_ERROR_STOP on
select count(*) as outbox_rows, min(occurred_at) as oldest, now() - min(occurred_at) as oldest_age
from asset_webhooks.outbox;

\echo 'Payloads waiting per webhook (open = still being filled by a run):'
select p.webhook_id, p.status, count(*) as payloads, sum(p.event_count) as events, min(p.created_at) as oldest,
       count(f.payload_id) filter (where f.next_attempt_at is null) as in_flight,
       count(f.payload_id) filter (where f.next_attempt_at is not null) as waiting_to_retry,
       min(f.next_attempt_at) as next_retry
from asset_webhooks.payloads p left join asset_webhooks.in_flight f using (payload_id)
where p.status in ('open', 'pending')
group by p.webhook_id, p.status order by p.webhook_id, p.status;

\echo 'Attempts in flight and their run process (gone: it died mid-request; a running service closes the attempt'
\echo 'and sends the payload again once the attempt is older than requestTimeoutSeconds + 5 s; unknown: ten minutes after it started):'
select f.webhook_id, f.payload_id, f.series, f.attempt_no, f.started_at, now() - f.started_at as running_for,
       case when f.process_id is null then 'unknown'
            when asset_webhooks.process_gone(f.process_id) then 'gone' else 'alive' end as process
from asset_webhooks.in_flight f
where f.next_attempt_at is null
order by f.started_at limit 20;

\echo 'The last coalescing runs:'
\echo '(state interrupted: the run failed or its process died; its committed chunks count in events, the next run took over the rest)'
select run_id, started_at, finished_at, finished_at - started_at as took, events, payloads,
       case when finished_at is not null then 'finished'
            when exists (select 1 from asset_webhooks.coalesce_runs later where later.run_id > r.run_id) then 'interrupted'
            else 'running' end as state
from asset_webhooks.coalesce_runs r order by run_id desc limit 10;

\echo 'Captures that failed inside a trigger (the source write went through; the event was not captured).'
\echo 'The metric asset_webhooks_capture_errors counts these rows by table and operation:'
select occurred_at, table_name, operation, sqlstate, message
from asset_webhooks.capture_errors order by capture_error_id desc limit 20;

\echo 'Open transactions that hold back the cleanup of dead rows, oldest first (needs pg_read_all_stats to see other roles):'
\echo 'While one stays open (pg_dump, a long report, a session left idle in transaction), every delivered payload'
\echo 'leaves rows that cannot be removed, and delivering a backlog slows down more the longer the backlog is.'
select pid, usename, application_name, state, now() - xact_start as open_for, left(query, 80) as query
from pg_stat_activity
where datname = current_database() and backend_xmin is not null and pid <> pg_backend_pid()
order by xact_start limit 5;
select gid, prepared, now() - prepared as open_for from pg_prepared_xacts where database = current_database();
