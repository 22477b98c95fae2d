-- Part of the lifecycle module (sql/functions/README.md).
-- A payload's state as the transitions read it: open, delivered,
-- dead_lettered, or for a pending payload waiting (in its webhook's queue),
-- retry_held (holding a slot until its retry) or in_flight (its attempt
-- started and not finished). p_dispatched: the payload holds a slot (it has
-- a row of asset_webhooks.in_flight), whose next_attempt_at is p_next_attempt_at.
create or replace function asset_webhooks.payload_state(p_status text, p_dispatched boolean, p_next_attempt_at timestamptz)
returns text
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
  return case when p_status <> 'pending' then p_status
              when not p_dispatched then 'waiting'
              when p_next_attempt_at is not null then 'retry_held'
              else 'in_flight' end;
end $$;
