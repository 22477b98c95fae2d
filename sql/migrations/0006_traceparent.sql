-- Tracing (docs/operations.md, "Tracing"): the DAM's trace context, captured
-- with each change, so that the delivery spans that carry its events link to
-- the application's own span.
--
-- The application sets it in the transaction that changes assets:
--   select set_config('asset_webhooks.traceparent', $1, true)
-- and every outbox row that transaction writes stores it. It is the column's
-- default, not a line of the capture triggers: every binding, the ones
-- written before this column included, captures it without a change, and
-- the triggers (the binding's own file) need no upgrade.
--
-- The default reads the setting and keeps it only when it has a
-- traceparent's length (55 characters): an empty or unset setting, or one of
-- any other length, stores null. Nothing in it can raise, so a malformed
-- value never fails the DAM's transaction, and it costs a row next to
-- nothing: current_setting(..., true) returns null for a setting never set
-- and '' for one set only in an ended transaction. The full check of the
-- form (a regular expression, some microseconds a row: too much for a bulk
-- update's every row) is the coalescer's, off the DAM's path, as it moves
-- the row to events (src/payloads/events.ts): events.traceparent holds only
-- valid W3C traceparents.
--
-- Adding a column without a default rewrites no row, and a default set
-- afterwards applies only to rows inserted from then on: the upgrade is
-- instant whatever the size of the table.
alter table asset_webhooks.outbox add column traceparent text;
alter table asset_webhooks.outbox alter column traceparent set default
  case
    when pg_catalog.length(pg_catalog.current_setting('asset_webhooks.traceparent', true)) = 55
    then pg_catalog.current_setting('asset_webhooks.traceparent', true)
  end;

-- Moved with its outbox row when it is a W3C traceparent (version, trace
-- id, parent id and flags in lowercase hex; the version not ff, neither id
-- all zeros), else null. Every change keeps its own context, a collapsed
-- edit's too (collapsed_into names the event that carried it), so a delivery
-- links to the contexts of all the changes its events stand for.
alter table asset_webhooks.events add column traceparent text;

-- A delivery attempt with tracing on reads the contexts of its payload's
-- events and of the edits collapsed into them, through these two indexes:
-- they hold only events that carry a context, with the context itself, so
-- the read probes small indexes and needs no heap row for an event without
-- one. An installation whose application sets no context keeps them empty
-- and pays nothing for them; one that does pays an index entry per change.
create index events_traced on asset_webhooks.events (event_id) include (traceparent)
  where traceparent is not null;
create index events_collapsed_traced on asset_webhooks.events (collapsed_into) include (traceparent)
  where collapsed_into is not null and traceparent is not null;

-- The span of the coalescing run (its traceparent), when tracing was on: a
-- delivery span links to the run that made its payload.
alter table asset_webhooks.coalesce_runs add column traceparent text;

comment on column asset_webhooks.outbox.traceparent is
  'What the capturing transaction set in asset_webhooks.traceparent (set_config(..., true)) when it has a '
  'traceparent''s length, else null; checked as it moves to events. Set by the column''s default: bindings need not name it.';
comment on column asset_webhooks.events.traceparent is
  'The captured W3C traceparent of the change (outbox.traceparent, when valid); delivery spans of the payloads that carry '
  'the event, or the event it was collapsed into, link to it.';
comment on column asset_webhooks.coalesce_runs.traceparent is
  'The traceparent of the run''s span when tracing was on; delivery spans of its payloads link to it.';
