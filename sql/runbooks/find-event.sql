-- Find one event by its eventId, and what became of it for every webhook.
-- When: a receiver reports a missing event and gives its eventId.
-- Usage: psql "$DATABASE_URL" -v event_id=UUID -f sql/runbooks/find-event.sql
-- (The command line does the same with more detail: asset-webhooks trace UUID)
\set ON_ERROR_STOP on
\if :{?event_id}
\else
do $$ begin raise exception 'missing variable event_id: run with -v event_id=UUID'; end $$;
\endif
\echo 'Still waiting in the outbox (not coalesced yet)?'
select event_id, event_type, asset_id, occurred_at, 'waiting for the next coalescing run' as state
from asset_webhooks.find_waiting_event(:'event_id');

\echo 'Outcome per webhook (excluded with the check, collapsed, or the payload that carries it):'
select o.webhook_id, o.outcome, o.excluded_by, o.collapsed_into, o.payload_id,
       p.status as payload_status, p.attempts, p.last_status_code, p.last_error, p.delivered_at, p.dead_letter_reason
from asset_webhooks.event_outcomes o
left join asset_webhooks.payloads p using (payload_id)
where o.event_id = :'event_id'
order by o.webhook_id;

\echo 'Every delivery attempt of the payloads that carry it (process: for an attempt without a result, whether its run process is alive):'
select a.payload_id, a.series, a.attempt_no, a.started_at, a.duration_ms, a.status_code, a.error_class, a.outcome,
       case when a.outcome is not null then null when a.process_id is null then 'unknown'
            when asset_webhooks.process_gone(a.process_id) then 'gone' else 'alive' end as process
from asset_webhooks.attempts a
where a.payload_id in (select payload_id from asset_webhooks.event_outcomes where event_id = :'event_id' and payload_id is not null)
order by a.payload_id, a.series, a.attempt_no;

select exists (select 1 from asset_webhooks.events where event_id = :'event_id')
    or exists (select 1 from asset_webhooks.find_waiting_event(:'event_id')) as event_found \gset
\if :event_found
\else
\echo 'No such event: it was not captured by this installation, or it is older than retentionDays.'
\endif
