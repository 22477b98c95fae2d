-- The default of coalesce_runs.started_at, the one clock
-- (asset_webhooks.now()): the start of a coalescing run: readiness counts the
-- time since the latest one, and a crashed run's seal reads the events
-- coalesced after it, both by the one clock.
-- Set only when it is not set already, as in_flight_process_id_default.sql explains.
do $dependents$
begin
  if (select pg_get_expr(d.adbin, d.adrelid)
      from pg_catalog.pg_attrdef d
      join pg_catalog.pg_attribute a on a.attrelid = d.adrelid and a.attnum = d.adnum
      where d.adrelid = 'asset_webhooks.coalesce_runs'::regclass and a.attname = 'started_at')
     is distinct from 'asset_webhooks.now()' then
    alter table asset_webhooks.coalesce_runs alter column started_at set default asset_webhooks.now();
  end if;
end $dependents$;
