-- 0019: payloads of a webhook that left the configuration are dead-lettered
-- at once, and a dead-lettered payload can be sent to another webhook.
--
-- A webhook without an `id` takes one derived from its url, so changing the
-- url makes it a new webhook: the old one's waiting payloads were stranded
-- until they expired. They are now dead-lettered with a reason of their own,
-- `webhook_removed`, as soon as no running `run` process has the webhook in
-- its configuration, and `dead-letters redeliver PAYLOAD_ID --to WEBHOOK_ID`
-- moves one to the new webhook.

alter table asset_webhooks.payloads drop constraint payloads_dead_letter_reason_check;
alter table asset_webhooks.payloads add constraint payloads_dead_letter_reason_check
  check (dead_letter_reason in ('rejected', 'retries_exhausted', 'expired', 'too_large', 'webhook_removed'));

comment on column asset_webhooks.payloads.dead_letter_reason is
  'rejected (a 4xx), retries_exhausted, expired (deadLetterAfterSeconds after the series started), '
  'too_large (one event over maxPayloadBytes), webhook_removed (the webhook left the configuration of every running run process)';

-- The view keeps its columns; the reasons it shows are documented on it.
comment on view asset_webhooks.dead_letters is
  'One row per dead-lettered payload. reason: rejected, retries_exhausted, expired, too_large or webhook_removed; '
  'redeliver with: asset-webhooks dead-letters redeliver PAYLOAD_ID [--to WEBHOOK_ID]';

-- A redelivery that moved the payload to another webhook (`--to`) names the
-- webhook it belonged to before; null when it stayed with its webhook. The
-- payload's webhook_id names where the series is sent.
alter table asset_webhooks.redeliveries add column moved_from text;

-- The webhooks in the configuration of each running `run` process, written
-- by record_configuration. A row lives as long as its process's lease
-- (asset_webhooks.process_gone); rows of gone processes are removed by the
-- next recording.
create table asset_webhooks.process_configurations (
  process_id   text primary key,
  webhook_ids  text[] not null,
  recorded_at  timestamptz not null default now()
);

-- Records the webhooks of one `run` process's configuration (at its start, at
-- every reload and before every coalescing run it makes) and dead-letters,
-- with reason webhook_removed, the pending payloads of every recorded webhook
-- that is in no running process's configuration. Returns those webhooks with
-- the number of payloads dead-lettered now.
--
-- The rule is "in no running process's configuration", not "absent from the
-- configuration being recorded": during a rolling change, processes with the
-- old and the new document run side by side, and each would otherwise take
-- the other's webhooks for removed and dead-letter payloads that the other is
-- sending. A webhook that is configured but disabled is not removed: its
-- payloads wait, and expire. Payloads still `open` belong to a coalescing run
-- in progress and are left to it; the next recording catches them once sealed.
-- A stop with an unchanged document removes nothing: its lease ends, and the
-- next process to start records the same webhooks.
--
-- Recordings are serialised, so one never decides on a snapshot that misses
-- another's row that is being written.
create function asset_webhooks.record_configuration(p_process_id text, p_webhook_ids text[])
returns table (webhook_id text, dead_lettered integer)
language plpgsql as $$
begin
  perform pg_advisory_xact_lock(hashtextextended('asset_webhooks.record_configuration', 0));
  insert into asset_webhooks.process_configurations as c (process_id, webhook_ids)
  values (p_process_id, p_webhook_ids)
  on conflict (process_id) do update set webhook_ids = excluded.webhook_ids, recorded_at = now();
  delete from asset_webhooks.process_configurations c
  where c.process_id <> p_process_id and asset_webhooks.process_gone(c.process_id);
  return query
  with removed as (
    select w.webhook_id from asset_webhooks.webhooks w
    where not exists (select 1 from asset_webhooks.process_configurations c where w.webhook_id = any (c.webhook_ids))
  ),
  dead as (
    update asset_webhooks.payloads p
    set status = 'dead_lettered', dead_letter_reason = 'webhook_removed', dead_lettered_at = clock_timestamp(),
        dispatched = false, next_attempt_at = null
    from removed r
    where p.webhook_id = r.webhook_id and p.status = 'pending'
    returning p.webhook_id
  )
  select d.webhook_id, count(*)::integer from dead d group by d.webhook_id order by d.webhook_id;
end $$;
