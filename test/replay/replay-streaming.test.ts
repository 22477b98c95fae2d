import { describe, expect, it } from 'vitest';
import { replay } from '../../src/replay/replay.js';
import { createPool } from '../../src/db/connect.js';
import { runCli } from '../helpers/cli.js';
import { openWebhook, registerWebhooks, resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const PAYLOADS = 10_000;
const SMALL = 1_000;
/** Events per payload: about 4 kB of body each, 40 MB over the window, which a replay must not gather. */
const EVENTS = 20;
const BASE = Date.parse('2026-11-20T00:00:00Z');
/** Payload i (from 0) of the webhook was created at BASE + i seconds. */
const at = (i: number): string => new Date(BASE + i * 1000).toISOString();

interface Summary {
  replayId: number;
  payloads: number;
  events: number;
  status: string;
  resumed: boolean;
  maxRssBytes: number;
}

const replayCli = async (...args: string[]): Promise<Summary> => {
  const result = await runCli(['replay', '--webhook', 'bulk', ...args, '--json', '--database-url', db.url], {
    timeoutMs: 120_000,
  });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as Summary;
};

/** The batches a replay committed: its series share the statement's time, one per batch. */
async function batchesOf(replayId: number): Promise<Array<{ first: number; last: number; n: number }>> {
  const { rows } = await db.pool.query<{ first: number; last: number; n: number }>(
    `select min(payload_id)::int as first, max(payload_id)::int as last, count(*)::int as n
     from asset_webhooks.redeliveries where replay_id = $1 group by requested_at order by requested_at`,
    [replayId],
  );
  return rows;
}

describe('replay of a large window', () => {
  it(
    'streams 10,000 payloads in batches of 500, in payload order, with memory that does not grow with the window, and resumes',
    { timeout: 300_000 },
    async () => {
      await resetData(db.pool);
      await registerWebhooks(db.pool, [openWebhook('bulk'), openWebhook('other')]);
      // Delivered payloads written as delivery leaves them, with another webhook's between them.
      await db.pool.query(
        `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at,
                                              series_started_at, delivered_at)
         select w, 'delivered', b.body, length(b.body), $2, '{}', t, t, t + interval '1 second'
         from generate_series(0, $1 - 1) g
         cross join lateral (select $3::timestamptz + g * interval '1 second' as t) c
         cross join unnest(array['bulk', 'other']) w
         cross join lateral (
           select '{"count":' || $2 || ',"events":[' || string_agg(
                    '{"atomId":' || g || ',"eventId":"' || gen_random_uuid() || '","eventTimestamp":"2026-11-20T00:00:00.000Z",' ||
                    '"assetId":' || (g * $2 + e) || ',"assetUuid":"' || gen_random_uuid() || '","eventType":"EDITED"}', ',') ||
                  '],"webhookTimestamp":"2026-11-20T00:00:00.000Z"}' as body
           from generate_series(1, $2) e) b
         order by g, w`,
        [PAYLOADS, EVENTS, at(0)],
      );

      const dry = await replayCli('--from', at(0), '--to', at(PAYLOADS), '--dry-run');
      expect(dry).toMatchObject({ payloads: PAYLOADS, events: PAYLOADS * EVENTS, status: 'completed' });

      const small = await replayCli('--from', at(0), '--to', at(SMALL));
      expect(small).toMatchObject({ payloads: SMALL, events: SMALL * EVENTS, status: 'completed', resumed: false });
      expect(await batchesOf(small.replayId)).toHaveLength(SMALL / 500);

      // Interrupted after its first batch, as a signal stops it.
      const pool = createPool(db.url, { max: 2 });
      const stop = new AbortController();
      try {
        const interrupted = await replay({
          pool,
          signal: stop.signal,
          onProgress: () => stop.abort(),
          selection: {
            webhookId: 'bulk',
            from: new Date(at(0)),
            to: new Date(at(PAYLOADS)),
            assetIds: null,
            eventTypes: null,
          },
        });
        expect(interrupted).toMatchObject({ status: 'running', payloads: 500, events: 500 * EVENTS });
      } finally {
        await pool.end();
      }
      const large = await replayCli('--from', at(0), '--to', at(PAYLOADS));
      expect(large).toMatchObject({
        payloads: PAYLOADS - SMALL,
        events: (PAYLOADS - SMALL) * EVENTS,
        status: 'completed',
        resumed: true,
      });

      // Every payload of the window started again exactly once, none of the other webhook's.
      const { rows: series } = await db.pool.query<{ webhook_id: string; status: string; series: number; n: number }>(
        `select webhook_id, status, series, count(*)::int as n from asset_webhooks.payloads
         group by webhook_id, status, series order by webhook_id`,
      );
      expect(series).toEqual([
        { webhook_id: 'bulk', status: 'pending', series: 2, n: PAYLOADS },
        { webhook_id: 'other', status: 'delivered', series: 1, n: PAYLOADS },
      ]);
      // Batches of 500 in payload order, each after the one before.
      const batches = await batchesOf(large.replayId);
      expect(batches).toHaveLength((PAYLOADS - SMALL) / 500);
      expect(batches.every((batch) => batch.n === 500)).toBe(true);
      expect(batches.every((batch, i) => i === 0 || batch.first > batches[i - 1]!.last)).toBe(true);
      // The process that walked 8,500 payloads (34 MB of bodies) peaked where the one that walked 1,000 did.
      expect(Math.abs(large.maxRssBytes - small.maxRssBytes)).toBeLessThan(16 * 1024 * 1024);
    },
  );
});
