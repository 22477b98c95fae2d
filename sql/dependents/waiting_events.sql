-- The outbox as operators read it: rows not coalesced yet, with their eventId.
create or replace view asset_webhooks.waiting_events as
select o.seq,
       coalesce(o.event_id, asset_webhooks.event_id_of(o.seq, o.occurred_at)) as event_id,
       o.occurred_at, o.event_type, o.asset_id, o.asset_uuid, o.atom_id, o.supertype, o.parent_id
from asset_webhooks.outbox o;
