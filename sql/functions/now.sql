-- The one clock of a payload's lifecycle: its window, its retry times, its
-- expiry, the age of an orphaned attempt. Every `run` process reads the
-- database's clock, never its own, so two processes whose clocks differ
-- cannot disagree about whether a payload's window has passed.
--
-- clock_timestamp() moved by the setting asset_webhooks.clock_offset (an
-- interval; unset or empty is none): tests move time with it, per session
-- (`set asset_webhooks.clock_offset = '3 seconds'`) or per connection (the
-- libpq option `-c asset_webhooks.clock_offset=3s` of a database URL), and
-- never sleep. Production leaves it unset.
create or replace function asset_webhooks.now() returns timestamptz
language sql volatile parallel safe as $$
  select clock_timestamp() + coalesce(nullif(current_setting('asset_webhooks.clock_offset', true), '')::interval,
                                      interval '0')
$$;
