-- Changes to an asset in the Trash. The specification edits only
-- active assets, and a receiver reads an EDITED after a DELETED as the asset
-- being back: an EDITED or REVERSION of an asset in the Trash is excluded for
-- every webhook, by the check named `in_trash` (see
-- sql/functions/excluding_check.sql and docs/spec-decisions.md).
--
-- Adding a column with no default, or a constant one, rewrites no row: the
-- upgrade is instant whatever the size of either table.
--
-- The same release keeps one asset's eventTimestamps strictly increasing for
-- every webhook (src/coalesce/clock.ts) without a table of its own: the last
-- time given to an asset is its latest events.occurred_at, which from this
-- release on holds the eventTimestamp as sent. No data moves for it: an event
-- coalesced before holds its own time, which is what plain webhooks were sent,
-- and the times raised for mirror webhooks are in
-- mirror_members.last_event_at, which the coalescer reads too.

-- Whether the asset was in the Trash when the change was made, as the
-- binding's capture trigger saw it (the reference binding: before and after
-- the change). Null when the binding does not say: the rows of a binding
-- written before this column, and every row captured before this migration.
-- The coalescer also excludes an EDITED or REVERSION of an asset that is in
-- the Trash when it is coalesced, so a null is never read as "active".
alter table asset_webhooks.outbox add column in_trash boolean;

-- The event was an EDITED or REVERSION of an asset in the Trash (captured so,
-- or in the Trash when coalesced), excluded for every webhook as `in_trash`.
-- Every event coalesced before this migration was routed without the check:
-- false.
alter table asset_webhooks.events add column in_trash boolean not null default false;
