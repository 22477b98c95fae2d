-- The one clock of a payload's lifecycle: its window, its retry times, its
-- expiry, the age of an orphaned attempt. Every `run` process reads the
-- database's clock, never its own, so two processes whose clocks differ
-- cannot disagree about whether a payload's window has passed.
--
-- clock_timestamp(), unless the setting asset_webhooks.clock says otherwise:
-- an interval runs the clock that far ahead (or behind), and a timestamp stops
-- it at that instant. Tests turn this one knob, per session
-- (`set asset_webhooks.clock = '3 seconds'`) or per connection (the libpq
-- option `-c asset_webhooks.clock=3s` of a database URL), and never sleep; a
-- stopped clock lets a test decide at an exact microsecond however slow the
-- machine is. Production leaves it unset (or empty).
create or replace function asset_webhooks.now() returns timestamptz
language plpgsql volatile parallel safe set search_path = pg_catalog, pg_temp as $$
declare
  v_setting text := nullif(current_setting('asset_webhooks.clock', true), '');
begin
  if v_setting is null then
    return clock_timestamp();
  elsif v_setting ~ '^\s*\d{4}-\d{2}-\d{2}' then
    return v_setting::timestamptz;
  else
    return clock_timestamp() + v_setting::interval;
  end if;
end $$;
