-- 0018: what an event stores follows the webhooks that receive it, not the
-- webhooks configured.
--
-- An event stores, once, what routing saw: the configuration it was routed by
-- (routing_id: the webhooks' definitions, stored once per configuration) and
-- the asset values the checks read. For the webhooks that receive it, it
-- stores the payload that carries it. For every other configured webhook the
-- outcome is `collapsed` or `excluded`, and the excluding check is derived
-- when asked, by evaluating the stored definition against the stored values
-- in the spec's order (asset_webhooks.excluding_check). Nothing is written per
-- excluded webhook.

-- One configuration the coalescer routed by: its webhooks, in configuration
-- order, each with what its checks read. A configuration is stored once
-- (digest: of the webhooks' ids and definitions); runs with the same
-- configuration share it.
create table asset_webhooks.routings (
  routing_id    bigint generated always as identity primary key,
  digest        text not null unique,
  created_at    timestamptz not null default clock_timestamp(),
  -- Set by every chunk coalesced with it: no event refers to a routing whose
  -- last use is older than the oldest event kept (see src/maintenance/maintenance.ts).
  last_used_at  timestamptz not null default clock_timestamp()
);

-- position counts from 1 in configuration order; definition is
-- {"enabled", "resourceTypes", "eventTypes", "filters"} as the configuration
-- document gives them after defaults (src/config/schema.ts).
create table asset_webhooks.routing_webhooks (
  routing_id  bigint not null references asset_webhooks.routings (routing_id) on delete cascade,
  position    integer not null,
  webhook_id  text not null,
  definition  jsonb not null,
  primary key (routing_id, position),
  unique (routing_id, webhook_id)
);

drop view asset_webhooks.event_outcomes;

-- Events coalesced before this migration kept their outcomes in `routes`,
-- which this replaces: they keep their rows in events and have no rows in
-- event_outcomes.
alter table asset_webhooks.events
  drop column routes,
  -- No foreign key: the coalescer writes it from the routing it recorded at
  -- the start of its run, and a key would cost an index probe per event.
  add column routing_id bigint,
  -- The routing positions of the webhooks that receive the event, and in the
  -- same order the payloads that carry it to them; null when none does.
  add column delivered_to integer[],
  add column payload_ids bigint[],
  -- What routing saw: the asset was gone by coalescing time, else its values
  -- as the checks read them (CONTRACT's filter semantics). Empty lists are
  -- stored as null. The supertype and parent are always stored; state,
  -- schema, type, domain, keywords and additional fields only as far as some
  -- enabled webhook's filters of the routing read them, so a value no check
  -- of the routing reads may be null. Collapsed and PURGED events store no
  -- values: no check reads them.
  add column asset_gone boolean not null default false,
  add column seen_supertype text,
  add column seen_parent_id bigint,
  add column seen_state text,
  add column seen_schema_id bigint,
  add column seen_type_id bigint,
  add column seen_domain_id bigint,
  add column seen_keywords text[],
  add column seen_field_names text[],
  add column seen_field_values text[];

-- The check that excludes the event from a webhook with this definition, in
-- the spec's order, or null when the webhook receives it: disabled (even
-- PURGED); a PURGED event passes from here on; asset_gone; resource_type;
-- event_type; parent (only top-level assets, unless a parentId filter is
-- configured); then each filter group, `filter:<n>` counting from 1. A value
-- list is a set: AND needs every listed value present, ANY one, NONE none;
-- matching is exact. `collapsed` is decided before any of these and is not
-- named here. It agrees with the coalescer's evaluation
-- (src/filters/compile.ts); a property test checks that on random cases.
create function asset_webhooks.excluding_check(p_definition jsonb, p_event asset_webhooks.events) returns text
language plpgsql stable as $$
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

-- One row per event and webhook of the configuration it was routed by. The
-- excluding check is derived only for the rows that ask for it: counting
-- outcomes reads no definition.
create view asset_webhooks.event_outcomes as
select e.event_id,
       e.event_type,
       e.asset_id,
       e.asset_uuid,
       e.occurred_at,
       w.webhook_id,
       case
         when e.collapsed_into is not null then 'collapsed'
         when d.pos is null then 'excluded'
         else case p.status when 'delivered' then 'delivered' when 'dead_lettered' then 'dead_lettered' else 'pending' end
       end as outcome,
       case when e.collapsed_into is null and d.pos is null then asset_webhooks.excluding_check(w.definition, e) end as excluded_by,
       p.payload_id,
       e.collapsed_into,
       e.atom_id,
       e.coalesced_at
from asset_webhooks.events e
join asset_webhooks.routing_webhooks w on w.routing_id = e.routing_id
cross join lateral (select array_position(e.delivered_to, w.position) as pos) d
left join asset_webhooks.payloads p on p.payload_id = e.payload_ids[d.pos];
