-- The default of routings.last_used_at, the one clock (asset_webhooks.now()):
-- a routing's last use: retention keeps a routing while events coalesced with
-- it (coalesced_at, by the one clock) stay.
-- Set only when it is not set already, as in_flight_process_id_default.sql explains.
do $dependents$
begin
  if (select pg_get_expr(d.adbin, d.adrelid)
      from pg_catalog.pg_attrdef d
      join pg_catalog.pg_attribute a on a.attrelid = d.adrelid and a.attnum = d.adnum
      where d.adrelid = 'asset_webhooks.routings'::regclass and a.attname = 'last_used_at')
     is distinct from 'asset_webhooks.now()' then
    alter table asset_webhooks.routings alter column last_used_at set default asset_webhooks.now();
  end if;
end $dependents$;
