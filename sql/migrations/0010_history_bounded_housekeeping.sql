-- 0010: housekeeping whose cost does not grow with history.
--
-- Measured on PostgreSQL 15 with a production-sized database (1,020,095
-- payloads, mostly delivered over 14 days; 5 million events; 20,100 runs and
-- ticks):
--
--   * Retention of payloads scanned the whole table every minute: no index
--     led to `delivered_at` or `dead_lettered_at`, and with fewer rows due
--     than the batch size the LIMIT never stopped the scan (1.0 s and 1.9 GB
--     read per run, returning nothing). A payload ends after it is created,
--     so maintenance now also asks for `created_at` below the cutoff, in that
--     order, which payloads_created answers (0.27 ms). An end time earlier than
--     the creation (too_large payloads by microseconds, a Node clock behind the
--     database's) only delays that payload's purge by the difference.
--   * Retention of events, runs and ticks reads them in the order of their
--     time column: events had the index (7 ms with statistics, 1.9-2.5 s
--     without), runs and ticks get one here.
--   * Expiry of waiting payloads and the sealing of open ones at the start
--     of every coalescing run scanned the whole table (575 and 622 ms) when the
--     statistics were taken while one webhook's backlog waited; each gets a
--     partial index holding only the rows it looks for (0.02-0.07 ms).
--   * `dead-letters` without --webhook sorted every dead letter on disk to
--     show the newest 10,000; it now reads them newest first.
--
-- What they cost the paths that write payloads: payloads_expiry gets an entry
-- for every payload sealed by coalescing or handed back to wait, payloads_open
-- for every payload a run leaves open until it seals it, payloads_dead_newest
-- for every dead letter. The others are written once per run or tick.
create index payloads_expiry on asset_webhooks.payloads (series_started_at) where status = 'pending' and not dispatched;
create index payloads_open on asset_webhooks.payloads (webhook_id) where status = 'open';
create index payloads_dead_newest on asset_webhooks.payloads (dead_lettered_at) where status = 'dead_lettered';
create index coalesce_runs_started_at on asset_webhooks.coalesce_runs (started_at);
create index ticks_created_at on asset_webhooks.ticks (created_at);
