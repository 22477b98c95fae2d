-- Which of the payloads p_payload_ids may not be sent to the webhook that a
-- redelivery or a replay would send them to (p_to_webhook_id, or each one's
-- own when null) because they carry UNMATCHED events and that webhook is not
-- a mirror one: a webhook that is not a mirror one never receives UNMATCHED
-- (docs/mirror.md), and its receiver has no set to remove an asset from.
-- Whether a webhook is a mirror one is read from the newest routing that names
-- it (is_mirror_webhook), once per webhook reached, so a webhook set back to
-- `mirror: false` is refused its own UNMATCHED once a coalescing run has
-- routed by that document. Only payloads in state p_status are answered
-- (`dead_lettered` for a redelivery, `delivered` for a replay): any other is
-- refused by its state (transition_refusal). One row per refused payload: its
-- position in p_payload_ids, its id and the webhook refused. Read-only:
-- redeliver_payloads and replay_payloads call it, and the CLI to word its
-- refusal.
create or replace function asset_webhooks.unmatched_refusals(p_payload_ids bigint[], p_to_webhook_id text,
                                                             p_status text default 'dead_lettered')
returns table (n bigint, payload_id bigint, webhook_id text)
language sql stable set search_path = pg_catalog, pg_temp as $$
  with asked as materialized (
    select i.n, p.payload_id, p.body_of, p.body, coalesce(p_to_webhook_id, p.webhook_id) as webhook_id
    from unnest(p_payload_ids) with ordinality as i(id, n)
    join asset_webhooks.payloads p on p.payload_id = i.id and p.status = p_status
  ),
  plain as materialized (
    select w.webhook_id from (select distinct a.webhook_id from asked a) w
    where not asset_webhooks.is_mirror_webhook(w.webhook_id)
  )
  select a.n, a.payload_id, a.webhook_id
  from asked a
  join plain w on w.webhook_id = a.webhook_id
  left join asset_webhooks.payloads b on b.payload_id = a.body_of
  -- The serializer writes every key bare and every string value JSON-escaped
  -- (src/payloads/serialize.ts), so these bytes can only be an event's type.
  where strpos(coalesce(b.body, a.body), '"eventType":"UNMATCHED"') > 0
  order by a.n
$$;
