-- Part of the lifecycle module (sql/functions/README.md): `resume --webhook
-- ID`, the operator's end of a suspension by a 410 Gone answer
-- (retry.disableOnGone). Clears the webhook's gone_since and, unless its
-- document still pauses it (config_paused), resumes it as resume_webhooks
-- does: each waiting payload's window moves forward by the time it was held,
-- the payload that got the 410 included, and they are sent in order again.
-- Returns one row for a known webhook: whether a 410 held it, whether it is
-- resumed now (false while its document pauses it), and how many payloads
-- wait for it; no row for an unknown webhook. Locks the held webhooks' rows
-- in id order first, as resume_webhooks does, so that it never waits on a
-- concurrent resume in a cycle.
create or replace function asset_webhooks.resume_gone_webhook(p_webhook_id text)
returns table (was_gone boolean, resumed boolean, waiting integer)
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  v_now timestamptz := asset_webhooks.now();
  v_was_gone boolean;
begin
  perform from asset_webhooks.webhooks w
  where w.paused_since is not null or w.webhook_id = p_webhook_id
  order by w.webhook_id for update;
  select w.gone_since is not null into v_was_gone from asset_webhooks.webhooks w where w.webhook_id = p_webhook_id;
  if not found then
    return;
  end if;
  update asset_webhooks.webhooks w set gone_since = null, gone_payload_id = null, updated_at = v_now
  where w.webhook_id = p_webhook_id and w.gone_since is not null;
  perform from asset_webhooks.resume_webhooks(array(
    select w.webhook_id from asset_webhooks.webhooks w where w.config_paused or w.webhook_id <> p_webhook_id));
  return query
    select v_was_gone, w.paused_since is null,
           (select count(*)::integer from asset_webhooks.payloads p
            where p.webhook_id = p_webhook_id and p.status in ('open', 'pending'))
    from asset_webhooks.webhooks w where w.webhook_id = p_webhook_id;
end $$;
