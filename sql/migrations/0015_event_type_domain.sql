-- 0015: the outbox's event_type is checked by a domain, not a table CHECK.
--
-- Every INSERT into the outbox, so every captured statement of the asset
-- database, paid for the CHECK at the start of its execution: PostgreSQL
-- keeps a table's check constraints as text, reads each back into an
-- expression tree (the five-string array constant byte by byte) and plans it
-- for every statement that inserts. A single-row UPDATE of assets captures
-- with one such statement, so it paid that each time: in `perf` of
-- single-row UPDATEs through the reference binding (embedded PostgreSQL 17,
-- pgbench, 4 clients), ExecConstraints was 15% of the trigger's samples,
-- two thirds of them in stringToNode. A domain's check is read once per
-- connection (the type cache) and only set up per statement. The values
-- allowed, and the error of a row that breaks them (23514, check_violation,
-- which the binding records as a capture error), stay the same.
--
-- The column changes type while the domain has no constraint yet, so the
-- outbox is not rewritten: the ACCESS EXCLUSIVE lock, which captured writes
-- wait for, is held for a moment. The rows already there passed the table
-- CHECK; validating the domain's constraint reads them once more under a
-- SHARE lock (writes wait for that scan too: a backlog of a million rows
-- takes well under a second). The one view over the column, and the
-- function returning its rows, are dropped and made again as migration 0004
-- made them.
create domain asset_webhooks.event_type as text;

drop function asset_webhooks.find_waiting_event(uuid);
drop view asset_webhooks.waiting_events;
alter table asset_webhooks.outbox drop constraint outbox_event_type_check;
alter table asset_webhooks.outbox alter column event_type type asset_webhooks.event_type;
alter domain asset_webhooks.event_type add constraint event_type_check
  check (value in ('CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION')) not valid;
alter domain asset_webhooks.event_type validate constraint event_type_check;

create view asset_webhooks.waiting_events as
select o.seq,
       coalesce(o.event_id, asset_webhooks.event_id_of(o.seq, o.occurred_at)) as event_id,
       o.occurred_at, o.event_type, o.asset_id, o.asset_uuid, o.atom_id, o.supertype, o.parent_id
from asset_webhooks.outbox o;

create function asset_webhooks.find_waiting_event(p_event_id uuid) returns setof asset_webhooks.waiting_events
language sql stable as $$
  select w.* from asset_webhooks.waiting_events w
  where w.seq = asset_webhooks.event_seq_of(p_event_id) and w.event_id = p_event_id
  union
  select w.* from asset_webhooks.waiting_events w
  join asset_webhooks.outbox o on o.seq = w.seq
  where o.event_id = p_event_id
$$;
