-- The default of payloads.created_at: the one clock of a payload's lifecycle
-- (asset_webhooks.now()), as series_started_at's, so that retention, which
-- counts from it by the same clock, and a test that moves the clock agree
-- with the window. Set only when it is not set already, as
-- in_flight_process_id_default.sql explains.
do $dependents$
begin
  if (select pg_get_expr(d.adbin, d.adrelid)
      from pg_catalog.pg_attrdef d
      join pg_catalog.pg_attribute a on a.attrelid = d.adrelid and a.attnum = d.adnum
      where d.adrelid = 'asset_webhooks.payloads'::regclass and a.attname = 'created_at')
     is distinct from 'asset_webhooks.now()' then
    alter table asset_webhooks.payloads alter column created_at set default asset_webhooks.now();
  end if;
end $dependents$;
