-- 0005: the outbox keeps only its primary key.
--
-- outbox_edited_by_asset served one lookup per claimed EDITED row (the latest
-- edit of its asset in the run) and cost every captured EDITED row an index
-- entry in the asset database's own write: a 100,000-row INSERT into the
-- outbox took 445-460 ms with it and 271-286 ms without. A coalescing run now
-- reads the latest edits once, in one pass over its backlog, into a temporary
-- table of its session (src/coalesce/claim.ts, recordLatestEdits).
drop index asset_webhooks.outbox_edited_by_asset;
