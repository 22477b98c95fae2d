-- A rate per receiver (webhook key rateLimit): the requests that all `run`
-- processes together send to a webhook stay within perSecond, with bursts of
-- at most `burst`. The state is shared through the database, never kept per
-- process: a token bucket per webhook, refilled by asset_webhooks.now().
--
-- One row per webhook that has ever had a rateLimit: the first columns of the
-- webhook's queue row (its delivery state that changes with every claim), kept
-- apart from asset_webhooks.webhooks, which the configuration, the health
-- verdicts and a claim's lock already write. Claims (claim_payloads) and
-- results (complete_attempts) rewrite it many times a second, so it has room
-- on its pages (fillfactor 50) and its indexes hold only columns that the
-- configuration alone writes: every update by a claim or a result is a HOT
-- update, and its dead versions are pruned in place. A webhook without a row, or whose rate_per_second is null, is not
-- limited, and its claims read nothing here.
create table asset_webhooks.webhook_queues (
  webhook_id        text primary key,
  -- rateLimit as the configuration last recorded it (null: no limit now).
  rate_per_second   double precision check (rate_per_second > 0),
  rate_burst        integer check (rate_burst >= 1),
  rate_adaptive     boolean not null default false,
  -- The rate in force: rate_per_second, or lower while rateLimit.adaptive
  -- has halved it after 429 or 503 answers (never below 1/s, or
  -- rate_per_second when that is lower). rate_changed_at: its last change;
  -- rate_decreased_at: its last halving.
  rate_current      double precision,
  rate_changed_at   timestamptz,
  rate_decreased_at timestamptz,
  -- The bucket: rate_tokens tokens at rate_refilled_at; since then it fills
  -- at rate_current per second up to rate_burst. A claim takes one token per
  -- payload it claims.
  rate_tokens       double precision not null default 0,
  rate_refilled_at  timestamptz,
  -- Time the webhook's payloads waited for tokens: rate_held_seconds in
  -- spells that have ended, and the spell under way since rate_held_since.
  rate_held_since   timestamptz,
  rate_held_seconds double precision not null default 0
) with (fillfactor = 50);

-- The adaptive webhooks: every completer statement asks whether there is
-- one before it reads its batch's payloads for them (complete_attempts).
create index webhook_queues_adaptive on asset_webhooks.webhook_queues (webhook_id)
  where rate_adaptive and rate_per_second is not null;

comment on table asset_webhooks.webhook_queues is
  'Per-webhook delivery state that changes with claims and results, apart from webhooks. Now: the rate limit '
  '(rateLimit) as a token bucket refilled by asset_webhooks.now(), shared by every run process.';
