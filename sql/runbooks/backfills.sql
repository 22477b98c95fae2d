-- Backfills: how far each has got, and how much of what it wrote the receiver has taken.
-- When: during or after `asset-webhooks backfill --webhook ID`, e.g. onboarding a receiver.
-- Usage: psql "$DATABASE_URL" [-v webhook_id=crm] -f sql/runbooks/backfills.sql
-- status running: in progress, or interrupted (the same command resumes it after last_asset_id);
-- completed: every asset done (the same command starts a new backfill).
\set ON_ERROR_STOP on
\if :{?webhook_id}
\else
\set webhook_id ''
\endif
select backfill_id, webhook_id, status, last_asset_id, assets_read, events_sent, excluded, excluded_by, payloads,
       cardinality(asset_ids) as listed_assets, requested_by, started_at, updated_at, finished_at
from asset_webhooks.backfills
where :'webhook_id' = '' or webhook_id = :'webhook_id'
order by backfill_id desc;

\echo 'Delivery of the backfilled events, per backfill and outcome:'
select o.backfill_id, o.webhook_id, o.outcome, count(*) as events, count(distinct o.payload_id) as payloads
from asset_webhooks.event_outcomes o
where o.backfill_id is not null and (:'webhook_id' = '' or o.webhook_id = :'webhook_id')
group by 1, 2, 3
order by 1 desc, 3;
