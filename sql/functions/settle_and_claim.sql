-- Part of the lifecycle module (sql/functions/README.md).
-- transition_payloads, then claim_payloads, in one transaction and one round
-- trip: the slots the settled attempts free are taken again at once, by the
-- same rules and turns as any claim, without waiting for the caller's next
-- claim. p_claim_max 0 claims nothing. The claim never waits: its row locks
-- (a webhook's, its payloads') skip locked rows, so it adds no lock wait to
-- the settle. The settle may wait, briefly, for another transaction's claim
-- of a webhook whose failing_since it writes; that claim waits for nothing.
--
-- One row per payload claimed, in claim order, each with the same `settled`:
-- transition_payloads' answers in request order; when nothing is claimed,
-- one row with `settled` alone. The claimed payloads are rows, not an array
-- of composites: a body in an array is copied whole at every step (into the
-- array, out of the function, out of the array), which for a batch of large
-- bodies cost more than the statement's own work.
--
-- p_sent names standbys the caller has sent since its previous statement:
-- their attempts are marked sent first (see attempts.sent). That changes no
-- payload's state (the attempt was in flight already), so it is no transition.
create or replace function asset_webhooks.settle_and_claim(
  p_transitions asset_webhooks.payload_transition[],
  p_claim_max integer, p_claim_share integer, p_claim_after text, p_expire_after_seconds integer,
  p_standby integer default 0, p_standby_for text[] default '{}',
  p_sent asset_webhooks.attempt_key[] default '{}'
)
returns table (settled asset_webhooks.transition_answer[], payload_id bigint, webhook_id text, series integer,
               attempt integer, series_started_at timestamptz, body text, standby boolean)
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_settled asset_webhooks.transition_answer[];
begin
  if cardinality(p_sent) > 0 then
    update asset_webhooks.attempts a set sent = true
    from unnest(p_sent) as s
    where a.payload_id = s.payload_id and a.series = s.series and a.attempt_no = s.attempt and not a.sent;
  end if;
  v_settled := array(select t from asset_webhooks.transition_payloads(p_transitions) t order by t.idx);
  if p_claim_max > 0 then
    return query
      select v_settled, c.payload_id, c.webhook_id, c.series, c.attempt, c.series_started_at, c.body, c.standby
      from asset_webhooks.claim_payloads(p_claim_max, p_claim_share, p_claim_after, p_expire_after_seconds,
                                         p_standby, p_standby_for) with ordinality c
      order by c.ordinality;
    if found then
      return;
    end if;
  end if;
  return query select v_settled, null::bigint, null::text, null::integer, null::integer, null::timestamptz,
                      null::text, null::boolean;
end $$;
