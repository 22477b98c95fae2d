-- Backfill and reconcile are one resumable sweep (src/sweep/): each keeps
-- its resume table, and a backfill now records, with its totals, the checks
-- that excluded its assets, so that a resumed backfill reports them over the
-- whole backfill, as it reports its totals.
--
-- The resume tables stay two: their names and columns are what operators
-- read (sql/runbooks/backfills.sql), and events.backfill_id and
-- events.reconcile_id, which event_outcomes and trace show, refer to them.
--
-- Adding a column with a constant default rewrites no row: the upgrade is
-- instant whatever the size of the table.

-- The assets the webhook's checks excluded, by the check that excluded them
-- (as event_outcomes names it), over every run of the backfill: its values
-- add up to excluded.
alter table asset_webhooks.backfills add column excluded_by jsonb not null default '{}';

-- A backfill written before this migration recorded only how many it
-- excluded, not by which check: that count is kept under `unrecorded`, so
-- that a backfill resumed after the upgrade still adds up.
update asset_webhooks.backfills
set excluded_by = jsonb_build_object('unrecorded', excluded)
where excluded > 0;
