-- The inverse of event_id_of for lookups: the seq an id was derived from
-- (meaningless for ids not made by event_id_of; callers compare the id
-- again). The installation's key is written into the text as event_id_of's is.
do $functions$
declare
  v_key bigint := (select i.event_id_key from asset_webhooks.installation i);
begin
  execute format($f$
    create or replace function asset_webhooks.event_seq_of(p_event_id uuid) returns bigint
    language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $body$
      select (('x' || right(replace(p_event_id::text, '-', ''), 16))::bit(64)::bigint & 4611686018427387903) # %s::bigint
    $body$$f$, v_key);
end $functions$;
