-- Whether a webhook is a mirror one (`mirror: true`), as read from the newest
-- routing that names it (the configuration coalescing last routed by, or a
-- reconcile's): a webhook set back to `mirror: false` is no longer one once
-- a coalescing run has routed by that document. One no routing names is not
-- one. Read by the checks that keep UNMATCHED from a webhook that is not a
-- mirror one (unmatched_refusals, replay_payloads).
create or replace function asset_webhooks.is_mirror_webhook(p_webhook_id text)
returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
  select coalesce((select (w.definition ->> 'mirror')::boolean
                   from asset_webhooks.routing_webhooks w
                   join asset_webhooks.routings r on r.routing_id = w.routing_id
                   where w.webhook_id = p_webhook_id
                   order by r.last_used_at desc, r.routing_id desc limit 1), false)
$$;
