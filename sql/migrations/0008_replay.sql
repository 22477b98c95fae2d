-- Replay (`asset-webhooks replay --webhook ID --from TIME --to TIME`): the
-- delivered payloads of a window sent again, each in a new series of its own
-- payload (same body, same eventIds, same webhook-id), as a redelivery sends
-- a dead letter again. A replay walks the window's payloads in payload order,
-- in batches that each commit with the replay's new position, so an
-- interrupted replay resumes after the last batch committed and sends no
-- payload twice.
--
-- Adding a column without a default, or a nullable attribute to a composite
-- type, rewrites no row: the upgrade is instant whatever the size of the
-- tables.

-- One row per replay. The selection is kept as asked: the webhook whose
-- payloads are taken, the window on the payloads' creation (created_at in
-- [from_time, to_time)), and the assets and event types that at least one
-- event of a payload must match (null: any). last_payload_id is the keyset
-- position: every payload of the selection up to it is done.
-- max_payload_id bounds the walk: the highest payload id created in the
-- window when the replay started, so payloads created later are not taken.
create table asset_webhooks.replays (
  replay_id        bigint generated always as identity primary key,
  webhook_id       text not null,
  -- The webhook the payloads are moved to (`--to-webhook`); null: their own.
  to_webhook_id    text,
  from_time        timestamptz not null,
  to_time          timestamptz not null,
  asset_ids        bigint[],
  event_types      text[],
  -- The selection as one short value the index below can hold: the md5 of
  -- every argument above.
  selection_key    text not null,
  status           text not null default 'running' check (status in ('running', 'completed')),
  max_payload_id   bigint,
  last_payload_id  bigint,
  -- Payloads started again, and the events they carry, over every run of the replay.
  payloads         bigint not null default 0,
  events           bigint not null default 0,
  requested_by     text not null,
  started_at       timestamptz not null default clock_timestamp(),
  updated_at       timestamptz not null default clock_timestamp(),
  finished_at      timestamptz
);
-- At most one unfinished replay per selection: the same request again resumes it.
create unique index replays_running on asset_webhooks.replays (selection_key) where status = 'running';

-- The replay that started this series; null for an operator's redelivery of a dead letter.
alter table asset_webhooks.redeliveries add column replay_id bigint;

-- A transition of kind `replay`: a delivered payload sent again in a new
-- series, recorded with the replay that asked for it.
alter type asset_webhooks.payload_transition add attribute replay_id bigint;

comment on table asset_webhooks.redeliveries is
  'One row per new series of a payload: an operator''s redelivery of a dead letter (replay_id null, previous_reason '
  'the dead-letter reason), or a replay of a delivered payload (replay_id names asset_webhooks.replays).';
