-- 0016: the process of a session is read from its application_name without a
-- regular expression.
--
-- asset_webhooks.attempts.process_id defaults to process_of_session(), so
-- every attempt a `run` process starts evaluated it once. Its regular
-- expression was compiled once per connection, but each match built its
-- automaton's states afresh: in `perf` of the delivery bench's database
-- (embedded PostgreSQL 17, 32 in flight), pg_regexec was 7.6% of the
-- server's samples. All but 32 of that round's 5,000 attempts were started
-- by settle_attempts, the one statement that every delivered payload waits
-- for in turn. Inserting
-- 100,000 rows whose column defaults to the function: 2.3 s with the regular
-- expression, 0.6 s with the string functions below (PG17, two runs each).
--
-- The same names match, and the same part is returned: 'asset-webhooks run '
-- followed by a UUID in canonical lower-case form (hex digits in groups of 8,
-- 4, 4, 4 and 12, joined by '-') and nothing after it; any other name gives
-- null. A single SELECT without FROM, so the planner inlines it into the
-- column default.
create or replace function asset_webhooks.process_of_session() returns text
language sql stable parallel safe
as $$
  select case
    when length(current_setting('application_name')) = 55
     and left(current_setting('application_name'), 19) = 'asset-webhooks run '
     and translate(substr(current_setting('application_name'), 20), '0123456789abcdef', '') = '----'
     and substr(current_setting('application_name'), 28, 1) || substr(current_setting('application_name'), 33, 1)
         || substr(current_setting('application_name'), 38, 1) || substr(current_setting('application_name'), 43, 1) = '----'
    then substr(current_setting('application_name'), 20)
  end
$$;
