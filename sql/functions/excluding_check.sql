-- The check that excludes the event from a webhook with this definition, in
-- this order, or null when the webhook receives it: disabled (even
-- PURGED); a PURGED event passes from here on; asset_gone; in_trash (an
-- EDITED or REVERSION of an asset in the Trash, as the coalescer marked it in
-- events.in_trash); resource_type;
-- event_type; parent (only top-level assets, unless a parentId filter is
-- configured); then each filter group, `filter:<n>` counting from 1. A value
-- list is a set: AND needs every listed value present, ANY one, NONE none;
-- matching is exact. `collapsed` is decided before any of these and is not
-- named here. It agrees with the coalescer's evaluation
-- (src/filters/compile.ts); a property test checks that on random cases.
create or replace function asset_webhooks.excluding_check(p_definition jsonb, p_event asset_webhooks.events) returns text
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
  v_group jsonb;
  v_n integer := 0;
  v_listed text[];
  v_values text[];
  v_passes boolean;
begin
  if not (p_definition ->> 'enabled')::boolean then
    return 'disabled';
  end if;
  if p_event.event_type = 'PURGED' then
    return null;
  end if;
  if p_event.asset_gone then
    return 'asset_gone';
  end if;
  if p_event.in_trash then
    return 'in_trash';
  end if;
  if p_event.seen_supertype is null or not (p_definition -> 'resourceTypes') ? p_event.seen_supertype then
    return 'resource_type';
  end if;
  if not (p_definition -> 'eventTypes') ? p_event.event_type then
    return 'event_type';
  end if;
  if p_event.seen_parent_id is not null and not p_definition @? '$.filters[*] ? (@.filterKind == "parentId")' then
    return 'parent';
  end if;
  for v_group in select g from jsonb_array_elements(p_definition -> 'filters') as g loop
    v_n := v_n + 1;
    v_listed := array(select jsonb_array_elements_text(v_group -> 'value'));
    v_values := case v_group ->> 'filterKind'
      when 'keywords' then coalesce(p_event.seen_keywords, '{}')
      when 'additionalFields' then
        case when v_group ? 'fieldName' then
          array(select f.value from unnest(p_event.seen_field_names, p_event.seen_field_values) as f(name, value)
                where f.name = v_group ->> 'fieldName')
        else coalesce(p_event.seen_field_values, '{}') end
      when 'state' then array_remove(array[p_event.seen_state], null)
      when 'schemaId' then array_remove(array[p_event.seen_schema_id::text], null)
      when 'typeId' then array_remove(array[p_event.seen_type_id::text], null)
      when 'domainId' then array_remove(array[p_event.seen_domain_id::text], null)
      when 'parentId' then array[coalesce(p_event.seen_parent_id::text, 'null')]
    end;
    v_passes := case v_group ->> 'condition'
      when 'AND' then v_listed <@ v_values
      when 'ANY' then v_listed && v_values
      else not (v_listed && v_values)
    end;
    if not v_passes then
      return 'filter:' || v_n;
    end if;
  end loop;
  return null;
end $$;
