-- Pausing or disabling a webhook, and what waits meanwhile.
-- When: a receiver asks to stop deliveries (maintenance), or is to receive nothing any more.
-- Usage: psql "$DATABASE_URL" -v webhook_id=crm [-v dead_letter_after_seconds=86400] -f sql/runbooks/pause-webhook.sql
--   (dead_letter_after_seconds: your retry.deadLetterAfterSeconds, when not the default 24 h)
--
-- Which to use: both are keys of the webhook in the configuration document, applied by SIGHUP to
-- every `asset-webhooks run` process (or `run --watch-config`, or a restart). Nothing is written
-- from SQL: the document is the source of truth and a restart would undo a change made here.
--   paused: true   for a receiver's maintenance window. Events are still coalesced into payloads;
--                  nothing is sent (an attempt already under way finishes; retries wait). Payloads
--                  wait in order and do not expire: the time paused is not counted towards
--                  retry.deadLetterAfterSeconds. With paused: false they are sent in order.
--   enabled: false to stop sending for good, or to drop what happens meanwhile. Events that occur
--                  are NOT delivered later (outcome excluded, check `disabled`); payloads created
--                  before wait, and are dead-lettered as `expired` once retry.deadLetterAfterSeconds
--                  (default 24 h) pass since their creation or last redelivery. enabled: true
--                  resumes the waiting ones in order.
-- Both set: enabled: false wins (the webhook is disabled, not paused).
-- A webhook can also be held by a 410 Gone answer (retry.disableOnGone): suspended_by_410_since
-- is set, its payloads wait the same way, and only `asset-webhooks resume --webhook ID` or a new
-- url ends it; paused: false does not. paused is true while either holds it.
\set ON_ERROR_STOP on
\if :{?webhook_id}
\else
do $$ begin raise exception 'missing variable webhook_id: run with -v webhook_id=crm'; end $$;
\endif
\if :{?dead_letter_after_seconds}
\else
\set dead_letter_after_seconds 86400
\endif
select webhook_id, enabled, paused_since is not null as paused, paused_since, url, concurrency, updated_at as state_since,
       config_paused as paused_by_document, gone_since as suspended_by_410_since
from asset_webhooks.webhooks where webhook_id = :'webhook_id';

\echo 'Payloads waiting for this webhook, and when each expires (dead_letter_after_seconds after its creation or redelivery, plus any time paused; checked about once a minute). While the webhook is paused or suspended, expires_at is null: the clock stands still.'
select p.payload_id, p.status, p.event_count, p.created_at,
       case when w.paused_since is null
            then p.series_started_at + make_interval(secs => :'dead_letter_after_seconds'::int) end as expires_at
from asset_webhooks.payloads p
left join asset_webhooks.webhooks w on w.webhook_id = p.webhook_id
where p.webhook_id = :'webhook_id' and p.status in ('open', 'pending')
order by p.payload_id;

\echo 'Events excluded because the webhook was disabled, in the last day (edits merged into a later edit count as collapsed, not here):'
select count(*) as events from asset_webhooks.event_outcomes
where webhook_id = :'webhook_id' and excluded_by = 'disabled' and occurred_at > now() - interval '1 day';
