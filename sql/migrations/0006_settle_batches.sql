-- Settles the results of several attempts in one statement: the service
-- gathers the results that finish while its previous batch is being written
-- (src/delivery/settle-batcher.ts). Each result is settled exactly as by
-- asset_webhooks.settle_attempt, which this calls once per result; the batch
-- saves a statement, a transaction and its commit per payload. Results are
-- settled in payload_id order, so two batches lock the payloads they settle in
-- the same order and cannot deadlock on them.
-- One row per result, `idx` being its position (from 1) in the arrays.
create function asset_webhooks.settle_attempts(
  p_payload_ids bigint[], p_series integer[], p_attempts integer[],
  p_duration_ms integer[], p_status_codes integer[], p_error_classes text[], p_error_messages text[], p_excerpts text[],
  p_outcomes text[], p_at timestamptz[], p_retry_at timestamptz[],
  p_chain boolean[], p_expire_after_seconds integer[]
) returns table (
  idx integer, applied boolean, next_payload_id bigint, next_webhook_id text, next_series integer, next_attempt integer,
  next_series_started_at timestamptz, next_body text
)
language plpgsql as $$
declare
  i integer;
begin
  for i in select o.i from unnest(p_payload_ids) with ordinality as o(payload_id, i) order by o.payload_id, o.i loop
    return query
      select i, s.applied, s.next_payload_id, s.next_webhook_id, s.next_series, s.next_attempt, s.next_series_started_at, s.next_body
      from asset_webhooks.settle_attempt(
        p_payload_ids[i], p_series[i], p_attempts[i], p_duration_ms[i], p_status_codes[i], p_error_classes[i], p_error_messages[i],
        p_excerpts[i], p_outcomes[i], p_at[i], p_retry_at[i], p_chain[i], p_expire_after_seconds[i]) as s;
  end loop;
end $$;
