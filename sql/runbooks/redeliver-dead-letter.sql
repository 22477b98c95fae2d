-- Send one dead-lettered payload again: same body, same eventIds, a fresh series of attempts.
-- When: the receiver is fixed (or the key rotated) and the operator decides to resend.
-- Usage: psql "$DATABASE_URL" -v payload_id=123 -f sql/runbooks/redeliver-dead-letter.sql
-- Same as `asset-webhooks dead-letters redeliver 123`; recorded with requested_by = current_user.
-- A running service sends it (with concurrency 1, in the webhook's order).
\set ON_ERROR_STOP on
\if :{?payload_id}
\else
do $$ begin raise exception 'missing variable payload_id: run with -v payload_id=123'; end $$;
\endif
begin;
-- The lifecycle module's redelivery (asset_webhooks.redeliver_payloads), as the
-- CLI's: a payload that is not dead-lettered is refused and nothing changes,
-- and so is one that carries UNMATCHED events when its webhook is no longer a
-- mirror one.
select r.applied as redelivered, r.reason as refusal,
       coalesce(r.reason = 'unmatched_to_plain_webhook', false) as unmatched_refused
from asset_webhooks.redeliver_payloads(array[:'payload_id'::bigint], current_user, null) r \gset
select payload_id, series, requested_by, previous_reason from asset_webhooks.redeliveries
where payload_id = :'payload_id'::bigint and :'redelivered'::boolean order by series desc limit 1;
\if :redelivered
commit;
-- Wakes the delivery pumps of running services; without it their next poll (within a second) finds it.
select pg_notify('asset_webhooks_payloads_ready', '');
select case when w.webhook_id is null then 'WARNING: the service has never run with webhook ' || p.webhook_id
            || '; the payload waits, and expires after retry.deadLetterAfterSeconds'
            when exists (select 1 from asset_webhooks.process_configurations)
                 and not exists (select 1 from asset_webhooks.process_configurations c where p.webhook_id = any (c.webhook_ids))
              then 'WARNING: webhook ' || p.webhook_id || ' is in the configuration of no running process (removed); the payload'
                   || ' is dead-lettered again as webhook_removed before the next coalescing run: send it to another webhook with'
                   || ' asset-webhooks dead-letters redeliver ' || p.payload_id || ' --to WEBHOOK_ID'
            when not w.enabled then 'WARNING: webhook ' || p.webhook_id || ' is disabled; the payload'
            || ' waits until it is enabled (then SIGHUP), and expires after retry.deadLetterAfterSeconds'
            else 'a running service sends it' end as next
from asset_webhooks.payloads p left join asset_webhooks.webhooks w using (webhook_id)
where p.payload_id = :'payload_id'::bigint;
\elif :unmatched_refused
rollback;
\echo 'Nothing was redelivered: the payload carries UNMATCHED events, which only a mirror webhook receives, and its webhook is not one any more (mirror: false).'
\echo 'Move it to a mirror webhook: asset-webhooks dead-letters redeliver' :payload_id '--to WEBHOOK_ID'
select payload_id, webhook_id, status, series, attempts from asset_webhooks.payloads where payload_id = :'payload_id'::bigint;
\else
rollback;
\echo 'Nothing was redelivered: the payload is not dead-lettered (its current state below; no row: no such payload_id).'
select payload_id, webhook_id, status, series, attempts from asset_webhooks.payloads where payload_id = :'payload_id'::bigint;
\endif
