-- The default of payloads.series_started_at: the database's clock as every
-- decision about the window reads it (asset_webhooks.now()), so a payload's
-- series starts on the same clock that later expires it. Set only when it is
-- not set already, as in_flight_process_id_default.sql explains.
do $dependents$
begin
  if (select pg_get_expr(d.adbin, d.adrelid)
      from pg_catalog.pg_attrdef d
      join pg_catalog.pg_attribute a on a.attrelid = d.adrelid and a.attnum = d.adnum
      where d.adrelid = 'asset_webhooks.payloads'::regclass and a.attname = 'series_started_at')
     is distinct from 'asset_webhooks.now()' then
    alter table asset_webhooks.payloads alter column series_started_at set default asset_webhooks.now();
  end if;
end $dependents$;
