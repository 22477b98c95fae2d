-- Records the webhooks of one `run` process's configuration (at its start, at
-- every reload and before every coalescing run it makes) and dead-letters,
-- with reason webhook_removed (dead_letter_removed, of the lifecycle module), the pending payloads of every recorded webhook
-- that is in no running process's configuration. Returns those webhooks with
-- the number of payloads dead-lettered now.
--
-- The rule is "in no running process's configuration", not "absent from the
-- configuration being recorded": during a rolling change, processes with the
-- old and the new document run side by side, and each would otherwise take
-- the other's webhooks for removed and dead-letter payloads that the other is
-- sending. A webhook that is configured but disabled is not removed: its
-- payloads wait, and expire. Payloads still `open` belong to a coalescing run
-- in progress and are left to it; the next recording catches them once sealed.
-- A stop with an unchanged document removes nothing: the process deletes its
-- row, and the next process to start records the same webhooks.
--
-- A process whose lease is free without a clean stop counts as running until
-- its lease has stayed free for p_grace_seconds, the grace crash recovery
-- waits (asset_webhooks.process_gone_grace): a live process whose
-- lease connection was lost for a moment takes its lease back well within
-- it, and must not have its webhooks taken for removed meanwhile. With
-- p_grace_seconds null (the caller's own lease is not yet settled) no
-- process is taken for gone by its free lease.
--
-- Every time here is asset_webhooks.now(), read once: the grace is counted
-- on the clock that crash recovery and the payloads' windows read.
--
-- Recordings are serialised, so one never decides on a snapshot that misses
-- another's row that is being written.
create or replace function asset_webhooks.record_configuration(p_process_id text, p_webhook_ids text[],
                                                    p_grace_seconds integer default null)
returns table (webhook_id text, dead_lettered integer)
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  v_now timestamptz := asset_webhooks.now();
  v_ids bigint[];
  v_webhooks text[];
begin
  -- The table's lock, which only the service's roles can take: reads go on,
  -- and a process taking its lease back waits for the recording to commit.
  lock table asset_webhooks.process_configurations in share row exclusive mode;
  insert into asset_webhooks.process_configurations as c (process_id, webhook_ids, recorded_at)
  values (p_process_id, p_webhook_ids, v_now)
  on conflict (process_id) do update set webhook_ids = excluded.webhook_ids, recorded_at = v_now, lease_free_since = null;
  -- Written only when it changes. process_gone holds each lease it finds free
  -- until this transaction ends: the process cannot take it back in between.
  update asset_webhooks.process_configurations c
  set lease_free_since = case when g.gone then v_now end
  from (select o.process_id, asset_webhooks.process_gone(o.process_id) as gone
        from asset_webhooks.process_configurations o where o.process_id <> p_process_id) g
  where c.process_id = g.process_id and g.gone <> (c.lease_free_since is not null);
  -- With their lease rows, left by processes that died: the update above
  -- found each free and holds it, and process_gone takes a process without
  -- one for gone.
  with removed as (
    delete from asset_webhooks.process_configurations c
    where c.process_id <> p_process_id and p_grace_seconds is not null
      and c.lease_free_since <= v_now - make_interval(secs => p_grace_seconds)
    returning c.process_id
  )
  delete from asset_webhooks.session_locks l using removed r where l.name = 'process:' || r.process_id;
  select coalesce(array_agg(p.payload_id order by p.payload_id), '{}'),
         coalesce(array_agg(p.webhook_id order by p.payload_id), '{}')
  into v_ids, v_webhooks
  from asset_webhooks.payloads p
  where p.status = 'pending'
    and exists (select 1 from asset_webhooks.webhooks w
                where w.webhook_id = p.webhook_id
                  and not exists (select 1 from asset_webhooks.process_configurations c
                                  where w.webhook_id = any (c.webhook_ids)));
  return query
  select v_webhooks[a.idx], count(*)::integer
  from asset_webhooks.dead_letter_removed(v_ids) a
  where a.applied
  group by v_webhooks[a.idx] order by v_webhooks[a.idx];
end $$;
