-- A series' start as the retry policy reads it: to the millisecond, rounded
-- up. The policy (src/delivery/policy/next-state.ts) counts the delivery
-- window from it in a JavaScript Date, which keeps milliseconds, where the
-- database keeps microseconds. Read rounded down, the policy's window would
-- end up to a millisecond before the database's: a retry due at its end
-- could then be claimed and its failure dead-lettered as expired before
-- deadLetterAfterSeconds had passed. Rounded up, the policy's window ends at
-- the database's or within a millisecond after it, and the database's exact
-- checks (the claim's, the expiry sweep's) decide in between.
create or replace function asset_webhooks.series_start_as_read(p_started_at timestamptz) returns timestamptz
language sql stable parallel safe as $$
  select date_trunc('milliseconds', p_started_at + interval '999 microseconds')
$$;
