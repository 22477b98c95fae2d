-- transition_payloads, then claim_payloads, in one transaction and one round
-- trip: the slots the settled attempts free are taken again at once, by the
-- same rules and turns as any claim, without waiting for the caller's next
-- claim. p_claim_max 0 claims nothing. The claim never waits: its advisory
-- locks are try-locks and its row locks skip locked rows, so it adds no lock
-- wait to the settle.
--
-- One row of two arrays rather than a set of rows: `settled` holds
-- transition_payloads' answers in request order, `claimed` the payloads
-- claimed in claim order, each array of one type, so neither shape is padded
-- with the other's null columns; the caller reads `claimed` with unnest.
--
-- p_sent names standbys the caller has sent since its previous statement:
-- their attempts are marked sent first (see attempts.sent). That changes no
-- payload's state (the attempt was in flight already), so it is no transition.
create or replace function asset_webhooks.settle_and_claim(
  p_transitions asset_webhooks.payload_transition[],
  p_claim_max integer, p_claim_share integer, p_claim_after text, p_expire_after_seconds integer,
  p_standby integer default 0, p_standby_for text[] default '{}',
  p_sent asset_webhooks.attempt_key[] default '{}',
  out settled asset_webhooks.transition_answer[],
  out claimed asset_webhooks.claimed_payload[]
)
language plpgsql
as $$
begin
  update asset_webhooks.attempts a set sent = true
  from unnest(p_sent) as s
  where a.payload_id = s.payload_id and a.series = s.series and a.attempt_no = s.attempt and not a.sent;
  settled := array(select t from asset_webhooks.transition_payloads(p_transitions) t order by t.idx);
  claimed := '{}';
  if p_claim_max > 0 then
    claimed := array(
      select row(c.payload_id, c.webhook_id, c.series, c.attempt, c.series_started_at, c.body,
                 c.standby)::asset_webhooks.claimed_payload
      from asset_webhooks.claim_payloads(p_claim_max, p_claim_share, p_claim_after, p_expire_after_seconds,
                                         p_standby, p_standby_for) with ordinality c
      order by c.ordinality);
  end if;
end $$;
