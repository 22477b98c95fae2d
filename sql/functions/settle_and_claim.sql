-- settle_payloads, then claim_payloads, in one transaction and one round trip:
-- the slots the settled attempts free are taken again at once, by the same
-- rules and turns as any claim, without waiting for the caller's next claim.
-- The settle answers come first (idx and applied, the claim columns null),
-- then the claimed payloads (idx null). p_claim_max 0 claims nothing. The
-- claim never waits: its advisory locks are try-locks and its row locks skip
-- locked rows, so it adds no lock wait to the settle.
--
-- p_sent_payload_ids, p_sent_series and p_sent_attempts name standbys the
-- caller has sent since its previous statement: their attempts are marked
-- sent first (see attempts.sent).
create or replace function asset_webhooks.settle_and_claim(
  p_payload_ids bigint[], p_series integer[], p_attempts integer[],
  p_duration_ms integer[], p_status_codes integer[], p_error_classes text[], p_error_messages text[], p_excerpts text[],
  p_outcomes text[], p_at timestamptz[], p_retry_at timestamptz[],
  p_receiver_failed boolean[], p_hold_until timestamptz[],
  p_now timestamptz, p_claim_max integer, p_claim_share integer, p_claim_after text, p_expire_after_seconds integer,
  p_standby integer default 0, p_standby_for text[] default '{}', p_started_at timestamptz[] default null,
  p_sent_payload_ids bigint[] default '{}', p_sent_series integer[] default '{}', p_sent_attempts integer[] default '{}'
) returns table (idx integer, applied boolean, payload_id bigint, webhook_id text, series integer, attempt integer,
                 series_started_at timestamptz, body text, standby boolean)
language plpgsql
as $$
begin
  update asset_webhooks.attempts a set sent = true
  from unnest(p_sent_payload_ids, p_sent_series, p_sent_attempts) as s(payload_id, series, attempt)
  where a.payload_id = s.payload_id and a.series = s.series and a.attempt_no = s.attempt and not a.sent;
  return query
    select s.idx, s.applied, null::bigint, null::text, null::integer, null::integer, null::timestamptz, null::text,
           null::boolean
    from asset_webhooks.settle_payloads(p_payload_ids, p_series, p_attempts, p_duration_ms, p_status_codes,
                                        p_error_classes, p_error_messages, p_excerpts, p_outcomes, p_at, p_retry_at,
                                        p_receiver_failed, p_hold_until, p_started_at) s;
  if p_claim_max > 0 then
    return query
      select null::integer, null::boolean, c.payload_id, c.webhook_id, c.series, c.attempt, c.series_started_at, c.body,
             c.standby
      from asset_webhooks.claim_payloads(p_now, p_claim_max, p_claim_share, p_claim_after, p_expire_after_seconds,
                                         p_standby, p_standby_for) c;
  end if;
end $$;
