import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { STANDBY_PER_WEBHOOK } from '../../src/delivery/standby.js';
import { replay } from '../../src/replay/replay.js';
import { createPool } from '../../src/db/connect.js';
import { runCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { openWebhook, registerWebhooks, resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const KEY = `whsec_${randomBytes(32).toString('base64')}`;
/**
 * The replayed payloads are delivered at the highest concurrency: 10,000 sent
 * one after another (concurrency 1, strict order) cost a minute or more on two
 * cores, at least one commit per payload; at 64 they cost a fraction of it.
 */
const CONCURRENCY = 64;
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

/** The payloads of webhook bulk as their first delivery left them: the md5 of each body, by payload id. */
const firstDelivery = new Map<number, string>();

/**
 * The most payloads earlier in `order` still to come when one arrives, over
 * the arrivals `arrived` (a permutation of `order`).
 */
function mostEarlierStillToCome(order: readonly number[], arrived: readonly number[]): number {
  const rank = new Map(order.map((id, i) => [id, i]));
  const seen = new Array<boolean>(order.length).fill(false);
  let lowest = 0;
  let most = 0;
  for (const id of arrived) {
    const r = rank.get(id)!;
    seen[r] = true;
    let missing = 0;
    for (let k = lowest; k < r; k++) if (!seen[k]) missing += 1;
    most = Math.max(most, missing);
    while (lowest < order.length && seen[lowest]) lowest += 1;
  }
  return most;
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

      // As delivered the first time; the body column is what every attempt of a payload sends.
      const { rows: delivered } = await db.pool.query<{ payload_id: number; md5: string }>(
        `select payload_id::int, md5(body) from asset_webhooks.payloads where webhook_id = 'bulk' order by payload_id`,
      );
      for (const row of delivered) firstDelivery.set(row.payload_id, row.md5);

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

  it(
    'a run process delivers the 10,000 replayed payloads to a receiver once each, with the same bodies and webhook-ids, in payload order within the concurrency',
    { timeout: 300_000 },
    async () => {
      // On the payloads the test above wrote and replayed: all of bulk's, pending in series 2.
      // The window's first delivery was written directly above, never sent: what it sent is
      // the body column, under the webhook-id src/delivery/http/signing.ts derives from the
      // payload, `msg_<installation id>_<payload id>`, the same for every series of a payload.
      expect(firstDelivery.size).toBe(PAYLOADS);
      const {
        rows: [installation],
      } = await db.pool.query<{ id: string }>('select installation_id as id from asset_webhooks.installation');
      const receiver = await startTestReceiver();
      const file = path.join(tempDirectory('aw-replay-'), 'config.yaml');
      // Retention is far off: the window was created weeks ago, and a purge of the other
      // webhook's delivered payloads would only cost time.
      writeFileSync(
        file,
        receiverConfig(
          [{ id: 'bulk', url: receiver.url, concurrency: CONCURRENCY, signing: { secret: 'bulk-signing' } }],
          { retentionDays: 365 },
        ),
      );
      const run = startRun({ databaseUrl: db.url, configFile: file, env: { ASSET_WEBHOOKS_SECRET_BULK_SIGNING: KEY } });
      try {
        await untilRunning(run);
        await receiver.waitFor(PAYLOADS, 240_000);
        await eventually(
          async () => {
            const { rows } = await db.pool.query<{ n: number }>(
              `select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'bulk' and status <> 'delivered'`,
            );
            return rows[0]!.n === 0 ? true : undefined;
          },
          { what: 'every replayed payload to be recorded as delivered' },
        );
      } finally {
        await stopRun(run);
        await receiver.close();
      }

      // Each payload's series 2 made one attempt, answered 200: one request each, no retry.
      const { rows: attempts } = await db.pool.query<{ attempts: number; payloads: number; delivered: number }>(
        `select count(*)::int as attempts, count(distinct a.payload_id)::int as payloads,
                count(*) filter (where a.outcome = 'delivered' and a.status_code = 200)::int as delivered
         from asset_webhooks.attempts a join asset_webhooks.payloads p using (payload_id)
         where p.webhook_id = 'bulk' and a.series = 2`,
      );
      expect(attempts).toEqual([{ attempts: PAYLOADS, payloads: PAYLOADS, delivered: PAYLOADS }]);
      expect(receiver.requests).toHaveLength(PAYLOADS);

      // Each request is a payload's first delivery again: its body, its webhook-id, signed.
      const byBody = new Map([...firstDelivery].map(([id, hash]) => [hash, id]));
      expect(byBody.size).toBe(PAYLOADS);
      const key = new Webhook(KEY);
      const arrived = receiver.requests.map((request) => {
        const payloadId = byBody.get(createHash('md5').update(request.body).digest('hex'));
        if (payloadId === undefined) throw new Error(`a body no first delivery sent: ${request.body.slice(0, 200)}`);
        expect(request.headers['webhook-id']).toBe(`msg_${installation!.id}_${payloadId}`);
        key.verify(request.body, request.headers as Record<string, string>);
        return payloadId;
      });
      const order = [...firstDelivery.keys()];
      expect([...arrived].sort((a, b) => a - b)).toEqual(order);

      // The order checked is the arrival order at the receiver, within what the concurrency
      // allows. The service claims a webhook's payloads in payload order, with at most its
      // concurrency plus its standbys in flight (docs/operations.md, delivery order), so when a
      // payload arrives, at most that many less one of the payloads before it are still to
      // come. Sent in any other order than their payload ids' (by id as text, as webhook-ids
      // sort, say), they break it by thousands. Strict arrival order, concurrency 1, is
      // checked on a small window by test/replay/replay.test.ts.
      expect(mostEarlierStillToCome(order, arrived)).toBeLessThanOrEqual(CONCURRENCY + STANDBY_PER_WEBHOOK - 1);
    },
  );
});
