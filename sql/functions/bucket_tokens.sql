-- The tokens a webhook's rate bucket (asset_webhooks.webhook_queues) holds at
-- p_now: those it held at p_refilled_at, plus p_rate a second since then, up
-- to p_burst. The bucket's one rule: the claim that takes tokens
-- (claim_payloads) and the completer that changes the rate (adapt_rates) both
-- read it here.
create or replace function asset_webhooks.bucket_tokens(p_tokens double precision, p_rate double precision,
                                                        p_burst integer, p_refilled_at timestamptz,
                                                        p_now timestamptz)
returns double precision
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
  return least(p_burst, p_tokens + p_rate * greatest(extract(epoch from p_now - p_refilled_at), 0));
end $$;
