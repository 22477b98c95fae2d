-- Undoes the start of a claimed attempt that will not be made after all (its
-- webhook was disabled, paused or removed by a reload the database had not
-- seen yet, or a standby nobody sent, given back by its process or, once
-- the process is gone, by crash recovery: see claim_payloads): the payload
-- goes back to the queue as it was, its last attempt the one before.
create or replace function asset_webhooks.abandon_attempt(p_payload_id bigint, p_series integer, p_attempt integer) returns void
language sql as $$
  delete from asset_webhooks.attempts
  where payload_id = p_payload_id and series = p_series and attempt_no = p_attempt and outcome is null;
  update asset_webhooks.payloads p set attempts = p_attempt - 1, dispatched = false,
    last_attempt_at = (select max(a.started_at) from asset_webhooks.attempts a where a.payload_id = p_payload_id)
  where p.payload_id = p_payload_id and p.series = p_series and p.attempts = p_attempt and p.status = 'pending';
$$;
