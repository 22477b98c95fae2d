-- The default of in_flight.process_id: the run process of the session that
-- claims the payload (see the table in 0009_in_flight and process_of_session).
-- Set only when it is not set already: ALTER TABLE takes a lock that would
-- stop every delivery while it waits, and the default is gone only on a new
-- installation or after process_of_session was dropped to change its
-- signature.
do $dependents$
begin
  if (select pg_get_expr(d.adbin, d.adrelid)
      from pg_catalog.pg_attrdef d
      join pg_catalog.pg_attribute a on a.attrelid = d.adrelid and a.attnum = d.adnum
      where d.adrelid = 'asset_webhooks.in_flight'::regclass and a.attname = 'process_id')
     is distinct from 'asset_webhooks.process_of_session()' then
    alter table asset_webhooks.in_flight alter column process_id set default asset_webhooks.process_of_session();
  end if;
end $dependents$;
