import { expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { replay } from '../../src/replay/replay.js';
import { runCli } from '../helpers/cli.js';
import { openWebhook, registerWebhooks, resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

const FROM = '2026-11-20T00:00:00Z';
const TO = '2026-11-21T00:00:00Z';

it(
  'resumes an interrupted replay from a session in another time zone, sending no payload twice',
  { timeout: 60_000 },
  async () => {
    await resetData(db.pool);
    await registerWebhooks(db.pool, [openWebhook('bulk')]);
    await db.pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at,
                                          series_started_at, delivered_at)
     select 'bulk', 'delivered', '{"count":0,"events":[]}', 10, 1, '{}', t, t, t
     from generate_series(0, 1199) g cross join lateral (select $1::timestamptz + g * interval '1 second' as t) c`,
      [FROM],
    );
    // Interrupted after its first batch, in a session whose time zone is Berlin's.
    const berlin = `${db.url}${db.url.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c TimeZone=Europe/Berlin')}`;
    const pool = createPool(berlin, { max: 2 });
    const stop = new AbortController();
    try {
      const first = await replay({
        pool,
        signal: stop.signal,
        onProgress: () => stop.abort(),
        selection: { webhookId: 'bulk', from: new Date(FROM), to: new Date(TO), assetIds: null, eventTypes: null },
      });
      expect(first).toMatchObject({ status: 'running', payloads: 500 });
    } finally {
      await pool.end();
    }
    // Its first batch delivered again meanwhile, as a running service would.
    await db.pool.query(
      `update asset_webhooks.payloads set status = 'delivered', delivered_at = now() where status = 'pending'`,
    );
    // The same command from a UTC session resumes it: the other 700, each once.
    const again = await runCli([
      'replay',
      '--webhook',
      'bulk',
      '--from',
      FROM,
      '--to',
      TO,
      '--json',
      '--database-url',
      db.url,
    ]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ resumed: true, payloads: 1200 });
    const { rows } = await db.pool.query(
      'select series, count(*)::int as n from asset_webhooks.payloads group by series order by series',
    );
    expect(rows).toEqual([{ series: 2, n: 1200 }]);
  },
);
