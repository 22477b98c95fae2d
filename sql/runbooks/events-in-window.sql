-- Events of a time window with their outcome per webhook, optionally of one asset.
-- When: a receiver reports "we missed something between 09:00 and 10:00" without eventIds.
-- Usage: psql "$DATABASE_URL" -v from=YYYY-MM-DDT09:00Z -v to=YYYY-MM-DDT10:00Z [-v asset_id=42] -f sql/runbooks/events-in-window.sql
--   (any PostgreSQL timestamptz input; the window includes `from` and excludes `to`)
\set ON_ERROR_STOP on
\if :{?from}
\else
do $$ begin raise exception 'missing variable from: run with -v from=YYYY-MM-DDT09:00Z'; end $$;
\endif
\if :{?to}
\else
do $$ begin raise exception 'missing variable to: run with -v to=YYYY-MM-DDT10:00Z'; end $$;
\endif
-- A time without an offset is UTC, as on the command line, and times are shown in UTC.
set timezone = 'UTC';
\if :{?asset_id}
\else
\set asset_id ''
\endif
select o.occurred_at, o.event_id, o.event_type, o.asset_id, o.webhook_id, o.outcome, o.excluded_by, o.payload_id
from asset_webhooks.event_outcomes o
where o.occurred_at >= :'from'::timestamptz and o.occurred_at < :'to'::timestamptz
  and (:'asset_id' = '' or o.asset_id = nullif(:'asset_id', '')::bigint)
order by o.occurred_at, o.event_id, o.webhook_id;

\echo 'Captured in the window but not coalesced yet:'
select occurred_at, event_id, event_type, asset_id
from asset_webhooks.waiting_events
where occurred_at >= :'from'::timestamptz and occurred_at < :'to'::timestamptz
  and (:'asset_id' = '' or asset_id = nullif(:'asset_id', '')::bigint)
order by seq;
