-- Which of the payloads p_payload_ids may not be sent to the webhook that a
-- redelivery would send them to (p_to_webhook_id, or each one's own when
-- null) because they carry UNMATCHED events and that webhook is not a mirror
-- one: a webhook that is not a mirror one never receives UNMATCHED
-- (docs/mirror.md), and its receiver has no set to remove an asset from.
-- Whether a webhook is a mirror one is read from the newest routing that names
-- it (is_mirror_webhook), so a webhook set back to `mirror: false` is refused
-- its own UNMATCHED once a coalescing run has routed by that document. Only
-- dead-lettered payloads are answered: any other is refused by its state
-- (transition_refusal). One row per refused payload: its position in
-- p_payload_ids, its id and the webhook refused. Read-only:
-- redeliver_payloads calls it, and the CLI to word its refusal.
create or replace function asset_webhooks.unmatched_refusals(p_payload_ids bigint[], p_to_webhook_id text)
returns table (n bigint, payload_id bigint, webhook_id text)
language sql stable set search_path = pg_catalog, pg_temp as $$
  select i.n, p.payload_id, t.webhook_id
  from unnest(p_payload_ids) with ordinality as i(id, n)
  join asset_webhooks.payloads p on p.payload_id = i.id and p.status = 'dead_lettered'
  cross join lateral (select coalesce(p_to_webhook_id, p.webhook_id) as webhook_id) t
  left join asset_webhooks.payloads b on b.payload_id = p.body_of
  where not asset_webhooks.is_mirror_webhook(t.webhook_id)
    -- The serializer writes every key bare and every string value JSON-escaped
    -- (src/payloads/serialize.ts), so these bytes can only be an event's type.
    and strpos(coalesce(b.body, p.body), '"eventType":"UNMATCHED"') > 0
  order by i.n
$$;
