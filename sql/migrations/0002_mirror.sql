-- Mirror webhooks (`mirror: true`): the assets the service has announced to
-- each one, so that it can tell the webhook when one stops matching.

-- One row per mirror webhook and asset it has been told about, kept when the
-- asset leaves the set (member false): last_event_at is what keeps one
-- asset's eventTimestamps rising for that webhook across leaving and coming
-- back. Written by the coalescing chunk or reconcile chunk that routes the
-- event, in its transaction, under the coalescing lock: only one writer at a
-- time. Retention never deletes from it.
create table asset_webhooks.mirror_members (
  webhook_id     text not null,
  asset_id       bigint not null,
  -- For an UNMATCHED of an asset gone without its PURGED reaching the webhook.
  asset_uuid     uuid,
  -- true: in the webhook's set (entered by CREATED, EDITED, REVERSION or
  -- DELETED routed to it); false: left it (PURGED or UNMATCHED).
  member         boolean not null,
  -- The eventTimestamp of the last event sent to the webhook for the asset.
  last_event_at  timestamptz not null,
  changed_at     timestamptz not null default clock_timestamp(),
  primary key (webhook_id, asset_id)
);

-- The routing positions (a subset of delivered_to) of the mirror webhooks
-- that got the event as an UNMATCHED, in place of its exclusion.
alter table asset_webhooks.events add column unmatched_to integer[];
-- Events written by a reconcile: like a backfill's (no seq, no run), their
-- routing holds the reconcile's one webhook; event_type EDITED or UNMATCHED.
alter table asset_webhooks.events add column reconcile_id bigint;
create index events_reconcile on asset_webhooks.events (reconcile_id) where reconcile_id is not null;

-- One row per reconcile of a mirror webhook. A chunk's payloads, events,
-- membership changes and the advance of its position commit in one
-- transaction, so an interrupted reconcile resumes after the last asset done,
-- and membership itself keeps an asset from being sent twice.
create table asset_webhooks.reconciles (
  reconcile_id    bigint generated always as identity primary key,
  webhook_id      text not null,
  -- The sha256 of the webhook's checks (resource types, event types,
  -- filters) the reconcile compares against.
  checks_digest   text not null,
  status          text not null default 'running' check (status in ('running', 'completed')),
  -- assets: walking the binding's assets; gone: the members whose asset no
  -- longer exists.
  phase           text not null default 'assets' check (phase in ('assets', 'gone')),
  -- Keyset position within the phase; null before its first chunk.
  last_asset_id   bigint,
  assets_read     bigint not null default 0,
  edited_sent     bigint not null default 0,
  unmatched_sent  bigint not null default 0,
  payloads        bigint not null default 0,
  requested_by    text not null,
  started_at      timestamptz not null default clock_timestamp(),
  updated_at      timestamptz not null default clock_timestamp(),
  finished_at     timestamptz
);
-- At most one unfinished reconcile per webhook: a second request resumes it.
create unique index reconciles_running on asset_webhooks.reconciles (webhook_id) where status = 'running';
