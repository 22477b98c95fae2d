-- eventIds are derived from the outbox row when it is read (coalescing,
-- investigation), not generated when it is written, so the capture path only
-- stores the row.
--
-- The ids are UUIDv7 (RFC 9562): 48 bits of occurred_at in milliseconds, then
-- 74 bits taken from seq mixed with a random key of this installation. They
-- are unique within the installation because seq is (the mix is a bijection),
-- stay unique if the sequence were ever restarted (the time differs), do not
-- repeat across installations (the key differs), and sort by time. They are
-- not secrets and not meant to be unguessable. The key is drawn once, with
-- the row of asset_webhooks.installation, and written into the function's
-- text as constants, so every migrate recreates the same function:
-- src/coalesce/event-ids.ts reads it back from event_id_of and derives the
-- same ids in Node.
do $functions$
declare
  -- 62 bits for the low half (the top two bits carry the UUID variant) and 12
  -- bits after the version digit, random per installation.
  v_key bigint := (select i.event_id_key from asset_webhooks.installation i);
  v_rand_a text := (select i.event_id_rand_a from asset_webhooks.installation i);
begin
  execute format($f$
    create or replace function asset_webhooks.event_id_of(p_seq bigint, p_occurred_at timestamptz) returns uuid
    language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $body$
      select (lpad(to_hex(floor(extract(epoch from p_occurred_at) * 1000)::bigint), 12, '0')
              || '7' || %L
              || to_hex(((p_seq # %s::bigint) & 4611686018427387903) | (-9223372036854775808)::bigint))::uuid
    $body$$f$, v_rand_a, v_key);
end $functions$;
