-- Backfills. (Bulk redelivery, `dead-letters redeliver --webhook ID`, needs no
-- schema of its own: it reads a webhook's dead letters through payloads_dead,
-- by dead_lettered_at, and records each redelivery in redeliveries as a
-- single one is.)
--
-- A backfill (`asset-webhooks backfill --webhook ID`, src/backfill/) sends one
-- EDITED event with a new eventId, to one webhook only, for every asset that
-- currently passes that webhook's checks, or for each listed asset. It writes
-- its payloads and their events directly, chunk by chunk; it does not go
-- through the outbox, so a backfill of a million assets never delays the
-- captured events of other webhooks behind its own rows.

-- One row per backfill. A chunk's payloads, its events and the advance of
-- last_asset_id commit in one transaction, so an interrupted backfill resumes
-- after the last asset whose event (or exclusion) committed, and no asset is
-- sent twice by one backfill. A backfill that completed is never resumed: a
-- later request with the same arguments starts a new one and sends again.
create table asset_webhooks.backfills (
  backfill_id    bigint generated always as identity primary key,
  webhook_id     text not null,
  -- The listed assets, distinct and ascending; null for every asset of the
  -- binding's asset_state view.
  asset_ids      bigint[],
  -- Which assets, as one short value the index below can hold whatever the
  -- length of the list: 'all', or the md5 of the listed ids joined by commas.
  assets_key     text not null,
  status         text not null default 'running' check (status in ('running', 'completed')),
  -- Keyset position: every asset with an id up to this one is done (sent, or
  -- excluded by a check, or listed but absent). Null before the first chunk.
  last_asset_id  bigint,
  -- Assets read, events sent (one per asset), assets excluded by the
  -- webhook's checks, payloads written.
  assets_read    bigint not null default 0,
  events_sent    bigint not null default 0,
  excluded       bigint not null default 0,
  payloads       bigint not null default 0,
  requested_by   text not null,
  started_at     timestamptz not null default clock_timestamp(),
  updated_at     timestamptz not null default clock_timestamp(),
  finished_at    timestamptz
);
-- At most one unfinished backfill per webhook and asset list: a second
-- request with the same arguments resumes it instead of starting another.
create unique index backfills_running on asset_webhooks.backfills (webhook_id, assets_key) where status = 'running';

-- Events written by a backfill have no outbox row and no coalescing run:
-- seq and run_id are null and backfill_id names the backfill. Every other
-- event has seq and run_id and a null backfill_id. (Dropping NOT NULL and
-- adding a nullable column without a default change no existing row.)
alter table asset_webhooks.events alter column seq drop not null, alter column run_id drop not null;
alter table asset_webhooks.events add column backfill_id bigint;
-- The events of one backfill (sql/runbooks/backfills.sql). Partial: captured
-- events, nearly all of them, get no entry.
create index events_backfill on asset_webhooks.events (backfill_id) where backfill_id is not null;

-- event_outcomes as before, with backfill_id appended: operators tell a
-- backfilled event from a captured one by it being non-null. A backfilled
-- event has a route to its one webhook only.
create or replace view asset_webhooks.event_outcomes as
select e.event_id,
       e.event_type,
       e.asset_id,
       e.asset_uuid,
       e.occurred_at,
       r.key as webhook_id,
       case
         when jsonb_typeof(r.value) = 'number' then
           case p.status when 'delivered' then 'delivered' when 'dead_lettered' then 'dead_lettered' else 'pending' end
         when r.value = '"collapsed"'::jsonb then 'collapsed'
         else 'excluded'
       end as outcome,
       case when jsonb_typeof(r.value) = 'string' and r.value <> '"collapsed"'::jsonb then r.value #>> '{}' end as excluded_by,
       p.payload_id,
       e.collapsed_into,
       e.atom_id,
       e.coalesced_at,
       e.backfill_id
from asset_webhooks.events e
cross join lateral jsonb_each(e.routes) r
left join asset_webhooks.payloads p
  on p.payload_id = case when jsonb_typeof(r.value) = 'number' then (r.value)::bigint end;
