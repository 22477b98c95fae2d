-- 0012: dispatch never starts a payload a settle has just taken.
--
-- dispatch picks a webhook's waiting payloads with `payload_id in (select ...
-- limit n)` and marked them dispatched without asking again whether they
-- still were waiting. A settle that had just taken one of them into its chain
-- held its row lock; dispatch waited for it, and once the settle committed,
-- PostgreSQL re-checked only the outer condition, which still matched: the
-- payload got a job of its own while the chain's request for it was still out.
-- The receiver got it twice at the same moment, and the webhook had one more
-- payload in flight than its concurrency. Found by a review under load (five
-- payloads sent twice in 30 s, a concurrency-3 webhook at 4 requests at once),
-- older than the pumps after each run, which made it likelier.
--
-- The outer UPDATE now asks `not dispatched` too, as take_next and
-- settle_attempts already did. A webhook with concurrency above 1 also skips
-- payloads another transaction holds (as take_next does), so the slot goes
-- to the next waiting payload instead of being wasted; with concurrency 1 it
-- waits, to keep the order. The function is otherwise as in 0009.
create or replace function asset_webhooks.dispatch(p_webhook_id text) returns integer
language plpgsql as $$
declare
  v_slots integer;
  v_in_order boolean;
  v_next bigint[];
  v_started integer := 0;
  r record;
begin
  perform pg_advisory_xact_lock(hashtextextended('asset_webhooks.dispatch:' || p_webhook_id, 0));
  select w.concurrency - (select count(*) from asset_webhooks.payloads p
                          where p.webhook_id = p_webhook_id and p.status = 'pending' and p.dispatched),
         w.concurrency = 1
    into v_slots, v_in_order
  from asset_webhooks.webhooks w
  where w.webhook_id = p_webhook_id and w.enabled;
  if v_slots is null or v_slots <= 0 then
    return 0;
  end if;
  if v_in_order then
    v_next := array(select q.payload_id from asset_webhooks.payloads q
                    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
                    order by q.payload_id + 0 limit v_slots);
  else
    v_next := array(select q.payload_id from asset_webhooks.payloads q
                    where q.webhook_id = p_webhook_id and q.status = 'pending' and not q.dispatched
                    order by q.payload_id + 0 limit v_slots for update skip locked);
  end if;
  for r in
    update asset_webhooks.payloads p set dispatched = true
    where p.payload_id = any(v_next) and p.status = 'pending' and not p.dispatched
    returning p.payload_id, p.series, p.attempts, p.next_attempt_at
  loop
    perform asset_webhooks.enqueue_delivery(r.payload_id, r.series, r.attempts + 1, coalesce(r.next_attempt_at, now()));
    v_started := v_started + 1;
  end loop;
  return v_started;
end $$;
