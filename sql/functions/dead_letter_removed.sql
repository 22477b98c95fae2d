-- Part of the lifecycle module (sql/functions/README.md): dead-letters the
-- payloads p_payload_ids as webhook_removed (record_configuration chooses
-- them). One answer per id, in order; a payload no longer waiting, held or
-- in flight (delivered meanwhile, still open) is refused and keeps its state.
create or replace function asset_webhooks.dead_letter_removed(p_payload_ids bigint[])
returns setof asset_webhooks.transition_answer
language sql volatile set search_path = pg_catalog, pg_temp as $$
  select t.* from asset_webhooks.transition_payloads(asset_webhooks.payload_transitions(array(
           select jsonb_build_object('kind', 'webhook_removed', 'payload_id', i.id)
           from unnest(p_payload_ids) with ordinality as i(id, n) order by i.n))) t
  order by t.idx
$$;
