-- After rotating a receiver's API key: find what failed with 401/403 and redeliver it.
-- When: operator support has updated the secret-manager entry named by the webhook's `apikey`.
-- Usage: psql "$DATABASE_URL" -v webhook_id=crm -f sql/runbooks/after-key-rotation.sql
-- The service reads the new value by itself: cached values expire after secrets.cacheSeconds
-- (default 300 s) and a 401/403 drops the cached value at once. Payloads rejected meanwhile are in the
-- dead-letter store (a 4xx is not retried); redeliver each one listed below with
--   asset-webhooks dead-letters redeliver PAYLOAD_ID
-- or  psql -v payload_id=PAYLOAD_ID -f sql/runbooks/redeliver-dead-letter.sql
\set ON_ERROR_STOP on
\if :{?webhook_id}
\else
do $$ begin raise exception 'missing variable webhook_id: run with -v webhook_id=crm'; end $$;
\endif
select payload_id, reason, last_status_code, event_count, dead_lettered_at
from asset_webhooks.dead_letters
where webhook_id = :'webhook_id' and last_status_code in (401, 403)
order by payload_id;

\echo 'Recent attempts of this webhook answered 401/403:'
select a.payload_id, a.series, a.attempt_no, a.started_at, a.status_code, a.outcome
from asset_webhooks.attempts a join asset_webhooks.payloads p using (payload_id)
where p.webhook_id = :'webhook_id' and a.status_code in (401, 403) and a.started_at > now() - interval '1 day'
order by a.started_at desc limit 50;
