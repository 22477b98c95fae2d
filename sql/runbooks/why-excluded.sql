-- Why a webhook did not receive an event: the check that excluded it, and the asset as it is now.
-- When: trace says "excluded by filter:2" and you want the values behind it.
-- Usage: psql "$DATABASE_URL" -v event_id=UUID -v webhook_id=crm -f sql/runbooks/why-excluded.sql
-- Checks, in order (the first that fails names the exclusion): collapsed (an EDITED merged into a
-- later edit of the same asset), disabled; a PURGED event passes from here on; asset_gone,
-- resource_type, event_type, parent, filter:<n> (n counts the webhook's filter groups from 1).
-- `asset-webhooks explain --webhook ID --asset ID` evaluates every check against the asset's
-- current state with the values compared.
\set ON_ERROR_STOP on
\if :{?event_id}
\else
do $$ begin raise exception 'missing variable event_id: run with -v event_id=UUID'; end $$;
\endif
\if :{?webhook_id}
\else
do $$ begin raise exception 'missing variable webhook_id: run with -v webhook_id=crm'; end $$;
\endif
select o.event_id, o.event_type, o.asset_id, o.webhook_id, o.outcome, o.excluded_by, o.collapsed_into,
       case o.excluded_by
         when 'disabled' then 'the webhook was disabled when the event was coalesced'
         when 'resource_type' then 'the asset''s supertype is not in the webhook''s resourceTypes (default: Resource only)'
         when 'event_type' then 'the event type is not in the webhook''s eventTypes'
         when 'parent' then 'the asset is a child asset; only top-level assets pass unless a parentId filter is configured'
         when 'asset_gone' then 'the asset no longer existed when the event was coalesced'
         else case when o.excluded_by like 'filter:%' then 'filter group ' || substr(o.excluded_by, 8) || ' of the webhook did not pass' end
       end as explanation
from asset_webhooks.event_outcomes o
where o.event_id = :'event_id' and o.webhook_id = :'webhook_id';

\echo 'The asset as the filters see it now:'
select s.* from asset_webhooks.asset_state s
where s.asset_id = (select asset_id from asset_webhooks.events where event_id = :'event_id');
