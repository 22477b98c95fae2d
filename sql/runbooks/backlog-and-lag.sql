-- Backlog and lag: is the service keeping up?
-- When: receivers report delays, or the outbox_oldest_age metric rises.
-- Usage: psql -f sql/runbooks/backlog-and-lag.sql
\set ON_ERROR_STOP on
select count(*) as outbox_rows, min(occurred_at) as oldest, now() - min(occurred_at) as oldest_age
from asset_webhooks.outbox;

\echo 'Payloads waiting per webhook (open = still being filled by a run):'
select webhook_id, status, count(*) as payloads, sum(event_count) as events, min(created_at) as oldest,
       count(*) filter (where dispatched) as in_flight, min(next_attempt_at) as next_retry
from asset_webhooks.payloads where status in ('open', 'pending')
group by webhook_id, status order by webhook_id, status;

\echo 'The last coalescing runs:'
select run_id, started_at, finished_at, finished_at - started_at as took, events, payloads
from asset_webhooks.coalesce_runs order by run_id desc limit 10;

\echo 'Captures that failed inside a trigger (the source write went through; the event was not captured):'
select occurred_at, table_name, operation, sqlstate, message
from asset_webhooks.capture_errors order by capture_error_id desc limit 20;
