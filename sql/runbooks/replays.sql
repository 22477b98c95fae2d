-- Replays: how far each has got, and how much of what it started the receiver has taken again.
-- When: during or after `asset-webhooks replay --webhook ID --from T --to END`, e.g. after a
-- receiver lost its data since T.
-- Usage: psql "$DATABASE_URL" [-v webhook_id=crm] -f sql/runbooks/replays.sql
-- status running: in progress, or interrupted (the same command resumes it after last_payload_id);
-- completed: every payload of the window done (the same command starts a new replay).
\set ON_ERROR_STOP on
\if :{?webhook_id}
\else
\set webhook_id ''
\endif
select replay_id, webhook_id, to_webhook_id, from_time, to_time, asset_ids, event_types, status, last_payload_id,
       max_payload_id, payloads, events, requested_by, started_at, updated_at, finished_at
from asset_webhooks.replays
where :'webhook_id' = '' or webhook_id = :'webhook_id' or to_webhook_id = :'webhook_id'
order by replay_id desc;

\echo 'Delivery of the replayed series, per replay and state of the payload now:'
select r.replay_id, p.webhook_id,
       case when p.series > r.series then 'sent again since' else p.status end as status,
       count(*) as payloads, sum(p.event_count) as events
from asset_webhooks.redeliveries r
join asset_webhooks.payloads p on p.payload_id = r.payload_id
where r.replay_id is not null
  and (:'webhook_id' = '' or p.webhook_id = :'webhook_id' or r.moved_from = :'webhook_id')
group by 1, 2, 3
order by 1 desc, 3;
