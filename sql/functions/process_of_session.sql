-- The run process of this session, from its application_name, which the
-- service sets on every connection of its pool to 'asset-webhooks run '
-- followed by the process id: a UUID in canonical lower-case form (hex digits
-- in groups of 8, 4, 4, 4 and 12, joined by '-'), and nothing after it. Any
-- other name gives null. application_name is a standard startup parameter
-- that connection poolers pass on. Written without a regular expression: it
-- is evaluated at every claim (and as the default of in_flight.process_id).
-- The LIKE pattern fixes the length, the prefix and where the four dashes are;
-- what is left once the hex digits are removed must be exactly those four, so
-- every other character is a lower-case hex digit. PL/pgSQL, as every
-- function delivery calls (see README.md, "Language").
create or replace function asset_webhooks.process_of_session() returns text
language plpgsql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
  v_name text := current_setting('application_name');
begin
  return case
    when v_name like 'asset-webhooks run ________-____-____-____-____________'
     and translate(substr(v_name, 20), '0123456789abcdef', '') = '----'
    then substr(v_name, 20)
  end;
end $$;
