import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { releaseSessionLock, takeSessionLock } from '../../src/db/session-lock.js';
import { runCli } from '../helpers/cli.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
let configPath: string;
/** The payload that waited for crm before any backfill. */
let waitingPayloadId: number;

const backfillCli = (...args: string[]) =>
  runCli(['backfill', '--config', configPath, '--database-url', db.url, ...args]);

interface Counts {
  payloads: number;
  events: number;
  backfills: number;
  outbox: number;
}
async function counts(): Promise<Counts> {
  const {
    rows: [row],
  } = await db.pool.query<Counts>(
    `select (select count(*)::int from asset_webhooks.payloads) as payloads, (select count(*)::int from asset_webhooks.events) as events,
            (select count(*)::int from asset_webhooks.backfills) as backfills, (select count(*)::int from asset_webhooks.outbox) as outbox`,
  );
  return row!;
}

beforeAll(async () => {
  await resetData(db.pool);
  // Assets 1..10; crm takes top-level Resources with keyword summer: 1..8 have it, 9 and 10 do not; 4 is a Project.
  await db.pool.query(
    "insert into assets (asset_id, supertype, latest_atom_id) select g, case when g = 4 then 'Project' else 'Resource' end, g * 10 from generate_series(1, 10) g",
  );
  await db.pool.query("insert into asset_keywords (asset_id, value) select g, 'summer' from generate_series(1, 8) g");
  const crm = openWebhook('crm');
  await registerWebhooks(db.pool, [crm]);
  await runCoalesce(db.pool, [crm]);
  const waiting = await payloads(db.pool, 'crm');
  expect(waiting.map((p) => p.status)).toEqual(['pending']);
  waitingPayloadId = waiting[0]!.payload_id;
  configPath = path.join(tempDirectory('aw-backfill-'), 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      assetUpdater: {
        network: { allowPrivateAddresses: true },
        webhooks: [
          {
            id: 'crm',
            url: 'http://127.0.0.1:9/hook',
            enabled: true,
            resourceTypes: ['Resource'],
            batchSize: 3,
            filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['summer'] }],
          },
          { id: 'off', url: 'http://127.0.0.1:9/off', enabled: false },
          { id: 'no-edits', url: 'http://127.0.0.1:9/no-edits', enabled: true, eventTypes: ['Created'] },
        ],
      },
    }),
  );
});

describe('backfill', () => {
  it('with --dry-run counts what it would send and changes nothing', { timeout: 120_000 }, async () => {
    const before = await counts();
    const result = await backfillCli('--webhook', 'crm', '--dry-run', '--json');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({
      dryRun: true,
      status: 'completed',
      backfillId: null,
      assetsRead: 10,
      eventsSent: 7,
      excluded: 3,
      payloads: 3,
      excludedBy: { resource_type: 1, 'filter:1': 2 },
    });
    expect(await counts()).toEqual(before);
  });

  it(
    'sends one EDITED per asset that passes the checks, to that webhook only, in payloads of batchSize after those waiting',
    { timeout: 120_000 },
    async () => {
      const result = await backfillCli('--webhook', 'crm', '--json');
      expect(result.code).toBe(0);
      const summary = JSON.parse(result.stdout) as {
        backfillId: number;
        status: string;
        eventsSent: number;
        payloads: number;
        resumed: boolean;
      };
      expect(summary).toMatchObject({ status: 'completed', eventsSent: 7, payloads: 3, resumed: false });
      const written = (await payloads(db.pool)).filter((p) => p.payload_id > waitingPayloadId);
      expect(written.map((p) => [p.webhook_id, p.status, p.event_count])).toEqual([
        ['crm', 'pending', 3],
        ['crm', 'pending', 3],
        ['crm', 'pending', 1],
      ]);
      const events = written.flatMap(bodyEvents);
      expect(events.map((e) => e.assetId)).toEqual([1, 2, 3, 5, 6, 7, 8]);
      expect(events.every((e) => e.eventType === 'EDITED')).toBe(true);
      expect(events.map((e) => e.atomId)).toEqual([10, 20, 30, 50, 60, 70, 80]);
      // The body is exactly the contract's, and the eventIds are new ones.
      for (const payload of written) {
        const body = JSON.parse(payload.body) as Record<string, unknown>;
        expect(Object.keys(body)).toEqual(['count', 'events', 'webhookTimestamp']);
        for (const event of bodyEvents(payload))
          expect(Object.keys(event)).toEqual([
            'atomId',
            'eventId',
            'eventTimestamp',
            'assetId',
            'assetUuid',
            'eventType',
          ]);
      }
      const { rows: captured } = await db.pool.query<{ n: number }>(
        'select count(*)::int as n from asset_webhooks.events where event_id = any($1::uuid[]) and backfill_id is null',
        [events.map((e) => e.eventId)],
      );
      expect(captured[0]!.n).toBe(0);
      // event_outcomes: one row per backfilled event, for crm only, marked with the backfill.
      const { rows: outcomes } = await db.pool.query<{
        webhook_id: string;
        outcome: string;
        backfill_id: number;
        n: number;
      }>(
        `select webhook_id, outcome, backfill_id, count(*)::int as n from asset_webhooks.event_outcomes
       where event_id = any($1::uuid[]) group by 1, 2, 3`,
        [events.map((e) => e.eventId)],
      );
      expect(outcomes).toEqual([{ webhook_id: 'crm', outcome: 'pending', backfill_id: summary.backfillId, n: 7 }]);
      // trace says so.
      const trace = await runCli(['trace', events[0]!.eventId, '--database-url', db.url]);
      expect(trace.stdout).toContain(`BACKFILLED: written by backfill ${summary.backfillId} at`);
      expect(trace.stdout).toMatch(/crm: in payload \d+ \(3 events/);
      const traceJson = JSON.parse(
        (await runCli(['trace', events[0]!.eventId, '--json', '--database-url', db.url])).stdout,
      ) as { backfillId: number };
      expect(traceJson.backfillId).toBe(summary.backfillId);
    },
  );

  it(
    'sends the listed assets that pass the checks, names those that do not exist, and starts a new backfill once one has completed',
    { timeout: 120_000 },
    async () => {
      const before = (await payloads(db.pool)).map((p) => p.payload_id);
      const run = async () =>
        JSON.parse(
          (await backfillCli('--webhook', 'crm', '--asset', '7', '3', '--asset', '9', '99999999999999999', '--json'))
            .stdout,
        ) as {
          backfillId: number;
          eventsSent: number;
          excludedBy: Record<string, number>;
          missing: string[];
          missingCount: number;
          resumed: boolean;
        };
      const first = await run();
      expect(first).toMatchObject({
        eventsSent: 2,
        excludedBy: { 'filter:1': 1 },
        missing: ['99999999999999999'],
        missingCount: 1,
        resumed: false,
      });
      const second = await run();
      expect(second.resumed).toBe(false);
      expect(second.backfillId).toBeGreaterThan(first.backfillId);
      const written = (await payloads(db.pool)).filter((p) => !before.includes(p.payload_id));
      expect(written.map((p) => bodyEvents(p).map((e) => e.assetId))).toEqual([
        [3, 7],
        [3, 7],
      ]);
      const text = await backfillCli('--webhook', 'crm', '--asset', '9', '99999999999999999');
      expect(text.stdout).toContain('1 listed assets do not exist: 99999999999999999');
      // A long list (no limit from the index that keeps one unfinished backfill per list).
      const long = await backfillCli(
        '--webhook',
        'crm',
        '--dry-run',
        '--json',
        '--asset',
        ...Array.from({ length: 3000 }, (_, i) => String(i + 1)),
      );
      expect(JSON.parse(long.stdout)).toMatchObject({ eventsSent: 7, missingCount: 2990 });
      const longRun = await backfillCli(
        '--webhook',
        'crm',
        '--json',
        '--asset',
        ...Array.from({ length: 3000 }, (_, i) => String(i + 1)),
      );
      expect(longRun.code).toBe(0);
      expect(JSON.parse(longRun.stdout)).toMatchObject({ eventsSent: 7, status: 'completed' });
    },
  );

  it(
    'resumes an unfinished backfill given the same arguments in any order, and refuses to run one another process holds (exit 1)',
    { timeout: 120_000 },
    async () => {
      // An interrupted backfill of assets 2, 5 and 6 that had done asset 2.
      const {
        rows: [row],
      } = await db.pool.query<{ backfill_id: number }>(
        `insert into asset_webhooks.backfills (webhook_id, asset_ids, assets_key, last_asset_id, assets_read, events_sent, payloads, requested_by)
       values ('crm', '{2,5,6}', md5('2,5,6'), 2, 1, 1, 1, 'test') returning backfill_id`,
      );
      const id = row!.backfill_id;
      const holder = await db.pool.connect();
      try {
        // One backfill of a webhook at a time, whatever its assets.
        expect(await takeSessionLock(holder, 'backfill:crm')).toBe(true);
        const busy = await backfillCli('--webhook', 'crm', '--asset', '6', '2', '5');
        expect(busy.code).toBe(1);
        expect(busy.stderr).toBe(
          '--webhook: expected no other backfill of webhook crm under way, but another process runs one ' +
            '(wait for it, or stop it and run this again to resume; asset_webhooks.backfills shows its progress)\n',
        );
      } finally {
        await releaseSessionLock(holder, 'backfill:crm');
        holder.release();
      }
      const before = (await payloads(db.pool)).map((p) => p.payload_id);
      const resumed = JSON.parse(
        (await backfillCli('--webhook', 'crm', '--asset', '5', '6', '2', '--json')).stdout,
      ) as Record<string, unknown>;
      expect(resumed).toMatchObject({
        backfillId: id,
        resumed: true,
        status: 'completed',
        assetsRead: 3,
        eventsSent: 3,
        payloads: 2,
        lastAssetId: '6',
      });
      const written = (await payloads(db.pool)).filter((p) => !before.includes(p.payload_id));
      expect(written.map((p) => bodyEvents(p).map((e) => e.assetId))).toEqual([[5, 6]]);
    },
  );

  it(
    'refuses a webhook that is not configured, disabled or without Edited (exit 1), and a malformed asset id (exit 2)',
    { timeout: 120_000 },
    async () => {
      const results = await Promise.all([
        backfillCli('--webhook', 'nosuch'),
        backfillCli('--webhook', 'off'),
        backfillCli('--webhook', 'no-edits'),
        backfillCli('--webhook', 'crm', '--asset', '1.5'),
      ]);
      expect(results.map((r) => [r.code, r.stderr.split('\n')[0]])).toEqual([
        [1, '--webhook: expected one of crm, off, no-edits, got "nosuch"'],
        [1, '--webhook: expected an enabled webhook, got off, which is disabled (enabled: false) and receives nothing'],
        [
          1,
          '--webhook: expected a webhook that takes Edited events (a backfill sends EDITED), got no-edits with eventTypes [CREATED]',
        ],
        [
          2,
          'error: --asset: expected an asset id, a positive integer up to 9223372036854775807, got "1.5" (run with --help for usage)',
        ],
      ]);
    },
  );
});
