-- Part of the lifecycle module (sql/functions/README.md).
-- The delivery completer's one statement: the results of a batch of attempts
-- (and expiries, crash recovery's interrupted attempts), written by
-- transition_payloads, with the standbys the caller has sent since its
-- previous statement marked sent first. It claims nothing: a slot a result
-- frees is the claimer's to take again, so a statement that writes results
-- never waits on a claim's locks, and a claim never rides on a write.
--
-- p_sent: standbys sent (see in_flight.sent). That changes no payload's state
-- (the attempt was in flight already), so it is no transition. A standby's
-- attempt was started at its claim, ahead of its request: marking it sent
-- moves its start to the database's clock now, the first statement after its
-- request left, so its record (and crash recovery's grace, counted from it)
-- starts no earlier than its request.
--
-- rateLimit.adaptive (asset_webhooks.webhook_queues): after the results are
-- written, each adaptive webhook that got a 429 or 503 in the batch has its
-- rate in force halved (not below 1/s, or its perSecond when that is lower)
-- and its bucket emptied, so the lower rate holds from now; at most once a
-- second, since the answers to requests sent before a halving still arrive
-- after it. A webhook whose batch holds successes and no such answer regains
-- a tenth of its perSecond (at least 1/s), once a second since its rate last
-- changed, up to perSecond: additive increase, multiplicative decrease. The
-- rows are locked in webhook order (as record_rate_limits does); only a batch
-- that names an adaptive webhook reads the payloads for it.
create or replace function asset_webhooks.complete_attempts(
  p_transitions asset_webhooks.payload_transition[],
  p_sent asset_webhooks.attempt_key[] default '{}'
)
returns setof asset_webhooks.transition_answer
language plpgsql
-- Every row is reached by its key, so a plan kept for the session reads
-- only the batch's rows however the tables grow (see transition_payloads).
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  if cardinality(p_sent) > 0 then
    update asset_webhooks.in_flight f set sent = true, started_at = asset_webhooks.now()
    from unnest(p_sent) as s
    where f.payload_id = s.payload_id and f.series = s.series and f.attempt_no = s.attempt and not f.sent
      and f.next_attempt_at is null;
  end if;
  return query select t.* from asset_webhooks.transition_payloads(p_transitions) t order by t.idx;
  if exists (select 1 from asset_webhooks.webhook_queues q where q.rate_adaptive and q.rate_per_second is not null) then
    perform asset_webhooks.adapt_rates(p_transitions);
  end if;
end $$;
