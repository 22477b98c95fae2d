-- The mirror digest (`mirror digest`, docs/mirror.md): a hash over a mirror
-- webhook's set, each asset with the eventTimestamp of the last event the
-- webhook was sent of it, that a receiver recomputes from its own copy.
-- last_event_at is the last time sent for the asset to any mirror webhook,
-- which is not the one a webhook got when a later event went to another
-- mirror webhook only; the time per webhook is kept beside it.
--
-- Adding a column with a constant default rewrites no row; the update below
-- rewrites each member once.

-- Per mirror webhook whose set holds the asset: the eventTimestamp of the
-- last event it was sent of the asset, as the payload's text (ISO-8601 UTC
-- with milliseconds and Z). A webhook that is not in `webhooks` has left the
-- set, whatever this holds for it.
alter table asset_webhooks.mirror_members add column sent_at jsonb not null default '{}';

-- Before this migration only last_event_at was kept: it is each member
-- webhook's time, exact wherever the webhook got the asset's last event sent
-- to a mirror webhook (always, with one mirror webhook). The next event sent
-- to the webhook for the asset replaces it.
update asset_webhooks.mirror_members
set sent_at = (
  select jsonb_object_agg(webhook_id, to_char(last_event_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
  from unnest(webhooks) as webhook_id
)
where cardinality(webhooks) > 0;
