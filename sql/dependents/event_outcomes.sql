-- One row per event and webhook of the configuration it was routed by. The
-- excluding check is derived only for the rows that ask for it: counting
-- outcomes reads no definition. backfill_id is non-null for an event written
-- by a backfill.
create or replace view asset_webhooks.event_outcomes as
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
       case
         when e.collapsed_into is not null then null
         when d.pos is null then asset_webhooks.excluding_check(w.definition, e)
         when u.unmatched then asset_webhooks.excluding_check(w.definition, jsonb_populate_record(e, '{"event_type": "EDITED"}'))
       end as excluded_by,
       p.payload_id,
       e.collapsed_into,
       e.atom_id,
       e.coalesced_at,
       e.backfill_id,
       case when d.pos is not null then case when u.unmatched then 'UNMATCHED' else e.event_type end end as sent_as,
       e.reconcile_id
from asset_webhooks.events e
join asset_webhooks.routing_webhooks w on w.routing_id = e.routing_id
cross join lateral (select array_position(e.delivered_to, w.position) as pos) d
cross join lateral (select e.event_type = 'UNMATCHED' or coalesce(w.position = any(e.unmatched_to), false) as unmatched) u
left join asset_webhooks.payloads p on p.payload_id = e.payload_ids[d.pos];
