-- Send one dead-lettered payload again: same body, same eventIds, a fresh series of attempts.
-- When: the receiver is fixed (or the key rotated) and the operator decides to resend.
-- Usage: psql -v payload_id=123 -f sql/runbooks/redeliver-dead-letter.sql
-- Same as `asset-webhooks dead-letters redeliver 123`; recorded with requested_by = current_user.
-- A running service sends it (with concurrency 1, in the webhook's order).
\set ON_ERROR_STOP on
begin;
with target as (
  select payload_id, series, dead_letter_reason, webhook_id
  from asset_webhooks.payloads
  where payload_id = :'payload_id'::bigint and status = 'dead_lettered'
  for update
), reset as (
  update asset_webhooks.payloads p
  set status = 'pending', series = t.series + 1, series_started_at = clock_timestamp(), attempts = 0,
      dispatched = false, next_attempt_at = null, dead_letter_reason = null, dead_lettered_at = null
  from target t where p.payload_id = t.payload_id
  returning p.payload_id, p.series, p.webhook_id, t.dead_letter_reason
)
insert into asset_webhooks.redeliveries (payload_id, series, requested_by, previous_reason)
select payload_id, series, current_user, dead_letter_reason from reset
returning payload_id, series, requested_by, previous_reason;
select asset_webhooks.dispatch(webhook_id) as jobs_started
from asset_webhooks.payloads where payload_id = :'payload_id'::bigint and status = 'pending';
commit;
\echo 'No row above means the payload was not dead-lettered (check asset_webhooks.dead_letters).'
