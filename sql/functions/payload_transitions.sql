-- Part of the lifecycle module (sql/functions/README.md): the one way a row of
-- asset_webhooks.payload_transition is built, from a JSON object per row named
-- by field (a field left out is null), in order. src/lifecycle/transitions.ts
-- builds those objects for every batch it sends, and the module's functions
-- that act on a list of payload ids (redeliver_payloads,
-- dead_letter_removed, resume_webhooks) build theirs here too, so a field
-- added to the type is read the same way everywhere.
create or replace function asset_webhooks.payload_transitions(p_rows jsonb[])
returns asset_webhooks.payload_transition[]
language plpgsql stable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
  return (select coalesce(array_agg(jsonb_populate_record(null::asset_webhooks.payload_transition, r.t) order by r.i), '{}')
          from unnest(p_rows) with ordinality as r(t, i));
end $$;
