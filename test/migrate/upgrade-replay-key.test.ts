import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { runCli } from '../helpers/cli.js';
import { openWebhook, registerWebhooks, resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

it('0010 gives a replay interrupted before it the key that resumes it', { timeout: 60_000 }, async () => {
  await resetData(db.pool);
  await registerWebhooks(db.pool, [openWebhook('bulk')]);
  await undoMigrationsAfter(db.pool, 9);
  await db.pool.query(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at,
                                          series_started_at, delivered_at)
     select 'bulk', 'delivered', '{"count":0,"events":[]}', 10, 1, '{}', t, t, t
     from generate_series(0, 9) g cross join lateral (select '2026-11-20T00:00:00Z'::timestamptz + g * interval '1 second' as t) c`,
  );
  // A replay of the window interrupted after payload 4, its key as the release before made it, in a Berlin session.
  const { rows: ids } = await db.pool.query<{ payload_id: number }>(
    'select payload_id from asset_webhooks.payloads order by payload_id',
  );
  const client = await db.pool.connect();
  try {
    await client.query("set time zone 'Europe/Berlin'");
    await client.query(
      `insert into asset_webhooks.replays (webhook_id, from_time, to_time, selection_key, max_payload_id,
                                           last_payload_id, payloads, events, requested_by)
       values ('bulk', $1, $2, md5(concat_ws('|', 'bulk', '', $1::timestamptz::text, $2::timestamptz::text, '*', '*')),
               $3, $4, 4, 4, 'ops@host')`,
      ['2026-11-20T00:00:00Z', '2026-11-21T00:00:00Z', ids.at(-1)!.payload_id, ids[3]!.payload_id],
    );
  } finally {
    client.release();
  }

  expect((await migrate(db.pool)).applied).toEqual(migrationsFrom(10));

  const again = await runCli([
    'replay',
    '--webhook',
    'bulk',
    '--from',
    '2026-11-20T00:00:00Z',
    '--to',
    '2026-11-21T00:00:00Z',
    '--json',
    '--database-url',
    db.url,
  ]);
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({ resumed: true, payloads: 10 });
  // The six after where it stopped, each once; the four it had done stay as they were.
  const { rows } = await db.pool.query(
    'select series, count(*)::int as n from asset_webhooks.payloads group by series order by series',
  );
  expect(rows).toEqual([
    { series: 1, n: 4 },
    { series: 2, n: 6 },
  ]);
});
