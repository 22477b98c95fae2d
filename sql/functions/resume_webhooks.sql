-- Part of the lifecycle module (sql/functions/README.md): resumes every paused
-- webhook not named in p_still_paused, and returns the webhooks resumed; a
-- webhook a 410 suspended (gone_since) stays held until resume_gone_webhook
-- or a new url clears that cause first. Each
-- of their open and pending payloads gets a pause_shift transition (its
-- window moves forward by the time it spent paused, by asset_webhooks.now();
-- one created during the pause starts its window now), and paused_since is
-- cleared. The webhooks' rows are locked first, in id order: concurrent
-- resumes (several `run` processes reloading) shift once, as the second finds
-- paused_since already cleared.
create or replace function asset_webhooks.resume_webhooks(p_still_paused text[])
returns setof text
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  v_now timestamptz := asset_webhooks.now();
  v_ids text[];
begin
  v_ids := array(select w.webhook_id from asset_webhooks.webhooks w
                 where w.paused_since is not null and w.gone_since is null
                   and not (w.webhook_id = any(p_still_paused))
                 order by w.webhook_id for update);
  if cardinality(v_ids) = 0 then
    return;
  end if;
  perform from asset_webhooks.transition_payloads(asset_webhooks.payload_transitions(array(
    select jsonb_build_object('kind', 'pause_shift', 'payload_id', p.payload_id, 'paused_since', w.paused_since)
    from asset_webhooks.payloads p
    join asset_webhooks.webhooks w on w.webhook_id = p.webhook_id
    where w.webhook_id = any(v_ids) and p.status in ('open', 'pending') and p.series_started_at < v_now
    order by p.payload_id)));
  return query
    update asset_webhooks.webhooks w set paused_since = null, updated_at = v_now
    where w.webhook_id = any(v_ids) returning w.webhook_id;
end $$;
