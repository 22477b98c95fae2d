-- Review the dead-letter store, optionally for one webhook.
-- When: daily review, or after a receiver outage.
-- Usage: psql "$DATABASE_URL" [-v webhook_id=crm] -f sql/runbooks/dead-letters.sql
-- Reasons: rejected (a 4xx, not retried), retries_exhausted, expired (not delivered within
-- retry.deadLetterAfterSeconds, default 24 h, of its creation or its last redelivery),
-- too_large (one event over maxPayloadBytes), webhook_removed (the webhook is in the
-- configuration of no running `run` process, e.g. its url and so its derived id changed; send it on
-- with `asset-webhooks dead-letters redeliver PAYLOAD_ID --to WEBHOOK_ID`).
\set ON_ERROR_STOP on
\if :{?webhook_id}
\else
\set webhook_id ''
\endif
select payload_id, webhook_id, reason, attempts, last_status_code, last_error, event_count,
       dead_lettered_at, created_at, event_ids[1:3] as first_event_ids
from asset_webhooks.dead_letters
where :'webhook_id' = '' or webhook_id = :'webhook_id'
order by dead_lettered_at desc;

\echo 'Per webhook and reason:'
select webhook_id, reason, count(*) as payloads, sum(event_count) as events
from asset_webhooks.dead_letters
where :'webhook_id' = '' or webhook_id = :'webhook_id'
group by webhook_id, reason order by webhook_id, reason;
