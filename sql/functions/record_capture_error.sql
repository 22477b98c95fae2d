-- Records a failed capture and warns; never raises, so the asset database's
-- write goes on whatever happens here. Security definer so that the roles of
-- the application need no privilege on capture_errors.
create or replace function asset_webhooks.record_capture_error(p_table text, p_operation text, p_sqlstate text, p_message text)
returns void language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
  insert into asset_webhooks.capture_errors (table_name, operation, sqlstate, message)
  values (p_table, p_operation, p_sqlstate, p_message);
  raise warning 'asset_webhooks: change on % (%) was not captured: % %', p_table, p_operation, p_sqlstate, p_message;
exception when others then
  raise warning 'asset_webhooks: change on % (%) was not captured and the error could not be recorded: % %',
    p_table, p_operation, p_sqlstate, p_message;
end $$;
