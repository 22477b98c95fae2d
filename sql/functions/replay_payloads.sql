-- Part of the lifecycle module (sql/functions/README.md): a batch of a
-- replay (asset_webhooks.replays): delivered payloads sent again, each in a
-- new series of its own payload (same body, same eventIds, same webhook-id),
-- recorded in asset_webhooks.redeliveries with p_replay_id, as asked by
-- p_requested_by (null: the session's role); with p_to_webhook_id each moves
-- to that webhook, as a moved redelivery does. One answer per id, in the
-- order given, with the series the payload has after the statement. A payload
-- that is not delivered is refused (transition_refusal: not_delivered) and
-- keeps its state; one that carries UNMATCHED events is refused, as
-- `unmatched_to_plain_webhook`, when the webhook it would reach is not a
-- mirror one (unmatched_refusals). src/replay/ calls it, one batch per
-- transaction.
create or replace function asset_webhooks.replay_payloads(p_payload_ids bigint[], p_replay_id bigint,
                                                          p_requested_by text, p_to_webhook_id text)
returns table (payload_id bigint, applied boolean, reason text, series integer)
language plpgsql set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
  v_answers asset_webhooks.transition_answer[];
  -- The positions in p_payload_ids refused for their UNMATCHED events.
  v_unmatched bigint[];
begin
  v_unmatched := array(select u.n from asset_webhooks.unmatched_refusals(p_payload_ids, p_to_webhook_id, 'delivered') u);
  -- The others, in the order given: the k-th answer is the k-th of them.
  v_answers := array(
    select t from asset_webhooks.transition_payloads(asset_webhooks.payload_transitions(array(
             select jsonb_build_object('kind', 'replay', 'payload_id', i.id, 'replay_id', p_replay_id,
                                       'requested_by', coalesce(p_requested_by, current_user),
                                       'to_webhook_id', p_to_webhook_id)
             from unnest(p_payload_ids) with ordinality as i(id, n)
             where not i.n = any(v_unmatched) order by i.n))) t
    order by t.idx);
  -- A statement of its own sees what transition_payloads wrote. The k-th answer
  -- is read by its position: a join on it would compare every pair.
  return query
    select i.id, coalesce((v_answers[i.k]).applied, false),
           case when i.k is null then 'unmatched_to_plain_webhook' else (v_answers[i.k]).reason end, p.series
    from (select u.id, u.n,
                 case when not u.n = any(v_unmatched)
                      then count(*) filter (where not u.n = any(v_unmatched)) over (order by u.n) end as k
          from unnest(p_payload_ids) with ordinality as u(id, n)) i
    left join asset_webhooks.payloads p on p.payload_id = i.id
    order by i.n;
end $$;
