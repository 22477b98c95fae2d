-- 410 Gone (retry.disableOnGone): a receiver that answers 410 suspends its
-- webhook as a pause does, until an operator runs `resume --webhook ID` or a
-- document changes the webhook's url.
--
-- A suspension is a pause with another cause, so it keeps the pause's one
-- clock: paused_since is set while the webhook is held for any cause (the
-- claim and the expiry sweep read only it), and the resume that ends the last
-- cause moves the waiting payloads' windows past the time held. The causes
-- are columns of their own, so that an operator can tell them apart and one
-- ending leaves the other in force.
--
-- Adding a column with a constant default rewrites no row: the upgrade is
-- instant whatever the size of the table.

-- The configuration's `paused` (enabled and paused) as run last wrote it. Until
-- now paused_since had no other cause: a paused webhook of a live installation
-- was paused by its document.
alter table asset_webhooks.webhooks add column config_paused boolean not null default false;
update asset_webhooks.webhooks set config_paused = true where paused_since is not null;

-- When a 410 answer suspended the webhook (retry.disableOnGone), and the
-- payload whose attempt got it; null while no 410 holds it. While set,
-- paused_since is set too, and only `resume --webhook ID`
-- (asset_webhooks.resume_gone_webhook) or a new url clears it.
alter table asset_webhooks.webhooks add column gone_since timestamptz;
alter table asset_webhooks.webhooks add column gone_payload_id bigint;
alter table asset_webhooks.webhooks
  add constraint webhooks_gone_held check (gone_since is null or paused_since is not null);

-- The attempt that got the 410 ends `suspended`: its payload waits with the
-- others for the resume. NOT VALID: every row written before this migration
-- holds a value of the narrower list, so no scan of the attempts is needed.
alter table asset_webhooks.attempts drop constraint attempts_outcome_check;
alter table asset_webhooks.attempts add constraint attempts_outcome_check
  check (outcome in ('delivered', 'retry', 'rejected', 'retries_exhausted', 'expired', 'suspended')) not valid;

comment on column asset_webhooks.webhooks.paused_since is
  'When the webhook was last held, by its document (config_paused) or by a 410 answer (gone_since); null '
  'while neither holds it. While set, none of its payloads is dispatched and none expires; the resume that '
  'ends the last cause clears it and moves each waiting payload''s series_started_at forward by the time held.';
