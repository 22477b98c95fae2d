-- Pausing a webhook, and what waits while it is paused.
-- When: a receiver asks to stop deliveries for maintenance.
-- Usage: psql "$DATABASE_URL" -v webhook_id=crm [-v dead_letter_after_seconds=86400] -f sql/runbooks/pause-webhook.sql
--   (dead_letter_after_seconds: your retry.deadLetterAfterSeconds, when not the default 24 h)
--
-- How to pause: set `enabled: false` on the webhook in the configuration document and send
-- SIGHUP to every `asset-webhooks run` process (or restart them). Nothing is written from SQL:
-- the document is the source of truth and a restart would undo a change made here.
-- While paused: events that occur are NOT delivered later (outcome excluded, check `disabled`);
-- payloads created before the pause wait, and are dead-lettered as `expired` once
-- retry.deadLetterAfterSeconds (default 24 h) pass since their creation or last redelivery.
-- Re-enable (enabled: true + SIGHUP) and waiting payloads resume in order.
\set ON_ERROR_STOP on
\if :{?webhook_id}
\else
do $$ begin raise exception 'missing variable webhook_id: run with -v webhook_id=crm'; end $$;
\endif
\if :{?dead_letter_after_seconds}
\else
\set dead_letter_after_seconds 86400
\endif
select webhook_id, enabled, url, concurrency, updated_at as state_since
from asset_webhooks.webhooks where webhook_id = :'webhook_id';

\echo 'Payloads waiting for this webhook, and when each expires (dead_letter_after_seconds after its creation or redelivery; checked about once a minute):'
select payload_id, status, event_count, created_at, series_started_at + make_interval(secs => :'dead_letter_after_seconds'::int) as expires_at
from asset_webhooks.payloads
where webhook_id = :'webhook_id' and status in ('open', 'pending')
order by payload_id;

\echo 'Events excluded because the webhook was disabled, in the last day (edits merged into a later edit count as collapsed, not here):'
select count(*) as events from asset_webhooks.event_outcomes
where webhook_id = :'webhook_id' and excluded_by = 'disabled' and occurred_at > now() - interval '1 day';
