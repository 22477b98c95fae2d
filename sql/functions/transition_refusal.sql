-- Part of the lifecycle module (sql/functions/README.md).
-- Why a transition of kind p_kind does not apply to a payload in state
-- p_state (payload_state), or null when it does. p_attempt_current: the
-- transition's attempt is the payload's current one and has no outcome yet.
--   attempt_result, interrupted, given_back: in_flight, at that attempt
--   expiry:          waiting or retry_held (an attempt in flight settles by its result)
--   webhook_removed: waiting, retry_held or in_flight (an open payload belongs to its coalescing run)
--   redelivery:      dead_lettered
--   replay:          delivered
--   pause_shift:     open, waiting, retry_held or in_flight
-- An unknown kind is no refusal: transition_payloads raises on it (a caller's bug).
create or replace function asset_webhooks.transition_refusal(p_kind text, p_state text, p_attempt_current boolean)
returns text
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
  return case
    when p_kind in ('attempt_result', 'interrupted', 'given_back') then
      case when p_state <> 'in_flight' then 'not_in_flight'
           when not coalesce(p_attempt_current, false) then 'attempt_moved_on' end
    when p_kind = 'expiry' then
      case when p_state = 'in_flight' then 'in_flight'
           when p_state not in ('waiting', 'retry_held') then 'not_pending' end
    when p_kind = 'webhook_removed' then
      case when p_state = 'open' then 'still_open'
           when p_state not in ('waiting', 'retry_held', 'in_flight') then 'not_pending' end
    when p_kind = 'redelivery' then
      case when p_state <> 'dead_lettered' then 'not_dead_lettered' end
    when p_kind = 'replay' then
      case when p_state <> 'delivered' then 'not_delivered' end
    when p_kind = 'pause_shift' then
      case when p_state not in ('open', 'waiting', 'retry_held', 'in_flight') then 'not_pending' end
  end;
end $$;
