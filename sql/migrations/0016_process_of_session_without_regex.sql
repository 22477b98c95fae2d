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
-- for in turn. Inserting 100,000 rows whose column defaults to the function
-- took 2.3 s with the regular expression and 0.6 s with a first version of
-- string functions (PG17, two runs each); the LIKE below, which replaced that
-- version's four substr() comparisons, took 0.47 s against its 0.74-0.76 s
-- for 200,000 rows (PG15, two runs each; 0.07-0.10 s without the default).
--
-- The same names match, and the same part is returned: 'asset-webhooks run '
-- followed by a UUID in canonical lower-case form (hex digits in groups of 8,
-- 4, 4, 4 and 12, joined by '-') and nothing after it; any other name gives
-- null. The LIKE pattern fixes the length, the prefix and where the four
-- dashes are; what is left once the hex digits are removed must be exactly
-- those four, so every other character is a lower-case hex digit. A single
-- SELECT without FROM, so the planner inlines it into the column default.
create or replace function asset_webhooks.process_of_session() returns text
language sql stable parallel safe
as $$
  select case
    when current_setting('application_name') like 'asset-webhooks run ________-____-____-____-____________'
     and translate(substr(current_setting('application_name'), 20), '0123456789abcdef', '') = '----'
    then substr(current_setting('application_name'), 20)
  end
$$;
