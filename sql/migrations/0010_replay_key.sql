-- A replay's selection key read its window's bounds as text in the session's
-- time zone, so the same replay command from a session in another zone (a
-- role's or a URL's TimeZone setting) did not find its interrupted replay: it
-- started another and sent again the payloads the first had replayed. The key
-- now reads the bounds as seconds since the epoch (src/replay/store.ts); the
-- keys of the replays still running are computed again here, from the columns
-- they were made of (asset_ids and event_types are stored sorted), so that
-- each resumes.
update asset_webhooks.replays
set selection_key = md5(concat_ws('|', webhook_id, coalesce(to_webhook_id, ''), extract(epoch from from_time)::text,
                                  extract(epoch from to_time)::text, coalesce(array_to_string(asset_ids, ','), '*'),
                                  coalesce(array_to_string(event_types, ','), '*')))
where status = 'running';
