-- One waiting event by its id: by seq when the id was derived, else by the stored id.
create or replace function asset_webhooks.find_waiting_event(p_event_id uuid) returns setof asset_webhooks.waiting_events
language sql stable set search_path = pg_catalog, pg_temp as $$
  select w.* from asset_webhooks.waiting_events w
  where w.seq = asset_webhooks.event_seq_of(p_event_id) and w.event_id = p_event_id
  union
  select w.* from asset_webhooks.waiting_events w
  join asset_webhooks.outbox o on o.seq = w.seq
  where o.event_id = p_event_id
$$;
