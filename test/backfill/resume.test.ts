import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runCli, startCli } from '../helpers/cli.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const ASSETS = 100_000;
/** Generous: the backfill holds one read chunk and one write's events, whatever the number of assets. */
const RSS_BOUND = 300 * 1024 * 1024;
let receiver: TestReceiver | undefined;
let service: TestService | undefined;

afterAll(async () => {
  await service?.stop();
  await receiver?.close();
});

/** The peak resident set of a live process, from /proc (kB in the file). */
function peakRss(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'))!;
  return Number(/(\d+)/.exec(line)![1]) * 1024;
}

describe('a backfill of 100,000 assets', () => {
  it(
    'interrupted with SIGINT, then killed with SIGKILL, and run again, sends every passing asset exactly once to a real receiver, in bounded memory',
    { timeout: 600_000 },
    async () => {
      await resetData(db.pool);
      // Every fifth asset lacks the keyword the webhook filters on: 80,000 pass.
      await db.pool.query('insert into assets (asset_id) select g from generate_series(1, $1::int) g', [ASSETS]);
      await db.pool.query(
        "insert into asset_keywords (asset_id, value) select g, 'summer' from generate_series(1, $1::int) g where g % 5 <> 0",
        [ASSETS],
      );
      await db.pool.query('truncate asset_webhooks.outbox');
      receiver = await startTestReceiver();
      const configPath = path.join(tempDirectory('aw-backfill-resume-'), 'config.yaml');
      writeFileSync(
        configPath,
        stringify({
          assetUpdater: {
            intervalSeconds: 1,
            network: { allowPrivateAddresses: true },
            webhooks: [
              {
                id: 'crm',
                url: receiver.url,
                enabled: true,
                batchSize: 100,
                concurrency: 4,
                filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['summer'] }],
              },
            ],
          },
        }),
      );
      service = await startTestService(db.url, readFileSync(configPath, 'utf8'));
      const args = ['backfill', '--webhook', 'crm', '--config', configPath, '--database-url', db.url, '--json'];

      // Interrupted with SIGINT once under way (its first progress line comes after 10,000 assets):
      // it stops after the chunk in progress commits and says so.
      const interruptedRun = startCli(args);
      await eventually(async () => (interruptedRun.output.stderr.includes('assets read') ? true : undefined), {
        timeoutMs: 120_000,
        what: 'the first progress line',
      });
      interruptedRun.child.kill('SIGINT');
      expect(await interruptedRun.exited).toBe(130);
      const stopped = JSON.parse(interruptedRun.output.stdout) as {
        status: string;
        lastAssetId: string;
        eventsSent: number;
      };
      expect(stopped.status).toBe('running');
      const {
        rows: [afterSigint],
      } = await db.pool.query<{ last: string; sent: number }>(
        "select last_asset_id::text as last, events_sent::int as sent from asset_webhooks.backfills where webhook_id = 'crm'",
      );
      expect(afterSigint).toEqual({ last: stopped.lastAssetId, sent: stopped.eventsSent });

      // Resumed, then killed once it has written again.
      const first = startCli(args);
      await eventually(async () => (first.output.stderr.includes('assets read') ? true : undefined), {
        timeoutMs: 120_000,
        what: 'the first progress line',
      });
      const killedPeak = peakRss(first.child.pid!);
      first.child.kill('SIGKILL');
      expect(await first.exited).toBe('SIGKILL');
      const {
        rows: [interrupted],
      } = await db.pool.query<{ status: string; last: string; sent: number }>(
        "select status, last_asset_id::text as last, events_sent::int as sent from asset_webhooks.backfills where webhook_id = 'crm'",
      );
      expect(interrupted!.status).toBe('running');
      expect(Number(interrupted!.last)).toBeGreaterThan(Number(stopped.lastAssetId));
      expect(Number(interrupted!.last)).toBeLessThan(ASSETS);

      const second = await runCli(args, { env: {}, timeoutMs: 300_000 });
      expect(second.code).toBe(0);
      const result = JSON.parse(second.stdout) as {
        status: string;
        resumed: boolean;
        assetsRead: number;
        eventsSent: number;
        excluded: number;
        payloads: number;
        excludedBy: Record<string, number>;
        maxRssBytes: number;
      };
      expect(result).toMatchObject({
        status: 'completed',
        resumed: true,
        assetsRead: ASSETS,
        eventsSent: 80_000,
        excluded: 20_000,
        payloads: 800,
        // Over the whole backfill, as its totals: the interrupted runs' exclusions too.
        excludedBy: { 'filter:1': 20_000 },
      });
      expect(second.stderr).toMatch(
        /backfill \d+ of webhook crm: 100000 assets read, 80000 sent in 800 payloads, 20000 excluded by its checks/,
      );
      expect(killedPeak).toBeLessThan(RSS_BOUND);
      expect(result.maxRssBytes).toBeGreaterThan(0);
      expect(result.maxRssBytes).toBeLessThan(RSS_BOUND);

      await eventually(
        async () => {
          const {
            rows: [left],
          } = await db.pool.query<{ n: number }>(
            "select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'crm' and status <> 'delivered'",
          );
          return left!.n === 0 ? true : undefined;
        },
        { timeoutMs: 300_000, what: 'every backfill payload delivered' },
      );
      const events = receiver.requests.flatMap(
        (request) => (JSON.parse(request.body) as { events: Array<{ assetId: number; eventType: string }> }).events,
      );
      const assets = new Set(events.map((event) => event.assetId));
      expect(events).toHaveLength(80_000);
      expect(assets.size).toBe(80_000);
      expect([...assets].every((id) => id % 5 !== 0 && id >= 1 && id <= ASSETS)).toBe(true);
      expect(events.every((event) => event.eventType === 'EDITED')).toBe(true);
      expect(receiver.requests.every((request) => (JSON.parse(request.body) as { count: number }).count <= 100)).toBe(
        true,
      );
    },
  );
});
