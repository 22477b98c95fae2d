import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { runCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { urlAhead } from '../helpers/db-clock.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * retry.disableOnGone through real `run` processes: a receiver that answers
 * 410 Gone beside a healthy one, both sent every event.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();

/** Long enough that nothing expires on the real clock while a test runs; the clock is moved past it instead. */
const DEAD_LETTER_AFTER_SECONDS = 3600;

let gone: TestReceiver;
let healthy: TestReceiver;
let moved: TestReceiver;
const runs: CliProcess[] = [];

beforeEach(async () => {
  await resetData(db.pool);
  [gone, healthy, moved] = await Promise.all([startTestReceiver(), startTestReceiver(), startTestReceiver()]);
  gone.respond = () => 410;
});
afterEach(async () => {
  for (const run of runs.splice(0)) await stopRun(run);
  await Promise.all([gone.close(), healthy.close(), moved.close()]);
});

function config(disableOnGone: boolean, goneUrl = gone.url): string {
  return receiverConfig(
    [
      { id: 'gone', url: goneUrl, batchSize: 1, concurrency: 1 },
      { id: 'healthy', url: healthy.url, batchSize: 1, concurrency: 4 },
    ],
    {
      requestTimeoutSeconds: 5,
      retry: { delaysSeconds: [1, 1, 1], deadLetterAfterSeconds: DEAD_LETTER_AFTER_SECONDS, disableOnGone },
    },
  );
}

async function startService(file: string, databaseUrl = db.url, httpPort?: number): Promise<CliProcess> {
  const run = startRun({ databaseUrl, configFile: file, httpPort });
  runs.push(run);
  await untilRunning(run);
  return run;
}

async function stopService(run: CliProcess): Promise<void> {
  runs.splice(runs.indexOf(run), 1);
  expect(await stopRun(run)).toBe(0);
}

interface PayloadRow {
  payload_id: number;
  status: string;
  dead_letter_reason: string | null;
  body: string;
  event_ids: string[];
}

async function payloadsOf(webhookId: string): Promise<PayloadRow[]> {
  const { rows } = await db.pool.query<PayloadRow>(
    `select payload_id::int, status, dead_letter_reason, body, event_ids::text[]
     from asset_webhooks.payloads where webhook_id = $1 order by payload_id`,
    [webhookId],
  );
  return rows;
}

async function createAssets(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) await db.pool.query('insert into assets default values');
}

/** Waits until every asset made so far is in a delivered payload of the healthy webhook. */
async function healthyCaughtUp(): Promise<void> {
  await eventually(
    async () => {
      const { rows } = await db.pool.query<{ assets: number; delivered: number }>(
        `select (select count(*)::int from assets) as assets,
                (select count(*)::int from asset_webhooks.payloads where webhook_id = 'healthy' and status = 'delivered') as delivered`,
      );
      return rows[0]!.delivered === rows[0]!.assets ? true : undefined;
    },
    { timeoutMs: 40_000, what: 'the healthy webhook delivering every event' },
  );
}

async function goneSince(): Promise<Date | null> {
  const { rows } = await db.pool.query<{ gone_since: Date | null }>(
    "select gone_since from asset_webhooks.webhooks where webhook_id = 'gone'",
  );
  return rows[0]?.gone_since ?? null;
}

describe('retry.disableOnGone: true', () => {
  it(
    'suspends the webhook at its first 410: nothing more is sent to it, its payloads neither expire nor dead-letter, the healthy one delivers, and resume --webhook sends them in order',
    { timeout: 180_000 },
    async () => {
      const file = path.join(tempDirectory('aw-gone-'), 'config.yaml');
      writeFileSync(file, config(true));
      const firstPort = await freePort();
      let run = await startService(file, db.url, firstPort);
      await createAssets(10);
      await gone.waitFor(1, 30_000);
      await eventually(async () => ((await goneSince()) !== null ? true : undefined), {
        what: 'the webhook suspended',
      });
      // The attempt that got the 410 counts as suspended, not as a failure: ReceiverFailing and ReceiverDown leave it alone.
      // Counted once its result is written, a moment after the row: asked until it shows.
      const suspendedCount =
        /^asset_webhooks_delivery_attempts_total\{(?=[^}]*webhook="gone")(?=[^}]*outcome="suspended")[^}]*\} 1$/m;
      await eventually(
        async () =>
          suspendedCount.test(await (await fetch(`http://127.0.0.1:${firstPort}/metrics`)).text()) ? true : undefined,
        { timeoutMs: 10_000, what: 'the suspended attempt counted' },
      );
      expect(suspendedCount.test(await (await fetch(`http://127.0.0.1:${firstPort}/metrics`)).text())).toBe(true);
      // Load while suspended: more events, delivered to the healthy webhook and kept for the gone one.
      await createAssets(15);
      await healthyCaughtUp();
      let waiting = await payloadsOf('gone');
      expect(waiting).toHaveLength(25);
      expect(waiting.every((p) => p.status === 'pending')).toBe(true);
      expect(gone.requests).toHaveLength(1);
      expect(gone.requests[0]!.body).toBe(waiting[0]!.body);

      // The database's clock moved past every payload's expiry: a run process on it sweeps, and expires none.
      await stopService(run);
      const ahead = urlAhead(db.url, (DEAD_LETTER_AFTER_SECONDS + 600) * 1000);
      const port = await freePort();
      run = await startService(file, ahead, port);
      await createAssets(5);
      await healthyCaughtUp();
      // An expiry sweep of this process has ended (each begins after its start, when the 25 were past their window).
      const sweptOnce = /^asset_webhooks_delivery_sweeps_total\{outcome="completed"\} [1-9]\d*$/m;
      await eventually(
        async () => (sweptOnce.test(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()) ? true : undefined),
        { timeoutMs: 15_000, what: 'an expiry sweep of the process whose clock is ahead' },
      );
      waiting = await payloadsOf('gone');
      expect(waiting).toHaveLength(30);
      expect(waiting.map((p) => p.status)).toEqual(waiting.map(() => 'pending'));
      expect(gone.requests).toHaveLength(1);
      // By that clock the 25 made before the move are past their window: only the suspension keeps them.
      const aheadPool = createPool(ahead, { max: 1 });
      try {
        const { rows: past } = await aheadPool.query<{ n: number }>(
          `select count(*)::int as n from asset_webhooks.payloads
           where webhook_id = 'gone' and series_started_at + make_interval(secs => $1) < asset_webhooks.now()`,
          [DEAD_LETTER_AFTER_SECONDS],
        );
        expect(past[0]!.n).toBe(25);
      } finally {
        await aheadPool.end();
      }
      const { rows: dead } = await db.pool.query('select payload_id from asset_webhooks.dead_letters');
      expect(dead).toEqual([]);

      // Shown: the gauge, the attempt's outcome, and trace for a waiting payload.
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/^asset_webhooks_webhook_suspended\{webhook="gone"\} 1$/m);
      expect(metrics).not.toMatch(/^asset_webhooks_webhook_paused\{webhook="gone"\}/m);
      const traced = await runCli(['trace', waiting[0]!.event_ids[0]!, '--database-url', ahead]);
      expect(traced.code).toBe(0);
      expect(traced.stdout).toContain(`waiting: webhook suspended since ${(await goneSince())!.toISOString()}`);
      expect(traced.stdout).toContain(`by a 410 Gone answer to payload ${waiting[0]!.payload_id}`);
      expect(traced.stdout).toMatch(/HTTP 410 in \d+ ms -> suspended/);

      // A reload that keeps the url keeps the suspension: once the configuration is recorded again
      // (after the webhook rows and the resumes a new url would make), the webhook is still held.
      const recordedAt = async (): Promise<number> =>
        (
          await db.pool.query<{ at: Date }>('select max(recorded_at) as at from asset_webhooks.process_configurations')
        ).rows[0]!.at.getTime();
      const recordedBefore = await recordedAt();
      writeFileSync(file, config(true));
      run.child.kill('SIGHUP');
      await eventually(async () => ((await recordedAt()) > recordedBefore ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the reloaded configuration recorded',
      });
      expect(await goneSince()).not.toBeNull();
      expect(gone.requests).toHaveLength(1);

      gone.respond = () => 200;
      const resumed = await runCli(['resume', '--webhook', 'gone', '--json', '--database-url', ahead]);
      expect(resumed.stderr).toBe('');
      expect(JSON.parse(resumed.stdout)).toEqual({ webhookId: 'gone', wasGone: true, resumed: true, waiting: 30 });
      await eventually(
        async () => ((await payloadsOf('gone')).every((p) => p.status === 'delivered') ? true : undefined),
        { timeoutMs: 60_000, what: 'every payload of the resumed webhook delivered' },
      );
      // Each once after the 410, in payload order, the one that got the 410 first.
      expect(gone.requests.slice(1).map((request) => request.body)).toEqual(waiting.map((p) => p.body));
      expect(await goneSince()).toBeNull();

      const again = await runCli(['resume', '--webhook', 'gone', '--database-url', ahead]);
      expect({ code: again.code, stdout: again.stdout }).toEqual({
        code: 0,
        stdout: 'webhook gone was not suspended by a 410 Gone answer: nothing to resume (0 payloads waiting)\n',
      });
      const againJson = await runCli(['resume', '--webhook', 'gone', '--json', '--database-url', ahead]);
      expect(JSON.parse(againJson.stdout)).toEqual({ webhookId: 'gone', wasGone: false, resumed: true, waiting: 0 });
      const unknown = await runCli(['resume', '--webhook', 'nobody', '--database-url', ahead]);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('--webhook: expected the id of a webhook the service has run with');
    },
  );

  it.each(['a reload (SIGHUP)', 'a restart'])(
    "a document that changes the suspended webhook's url resumes it, by %s: its payloads go to the new url in order",
    { timeout: 120_000 },
    async (how) => {
      const file = path.join(tempDirectory('aw-gone-'), 'config.yaml');
      writeFileSync(file, config(true));
      const run = await startService(file);
      await createAssets(6);
      await gone.waitFor(1, 30_000);
      await eventually(async () => ((await goneSince()) !== null ? true : undefined), {
        what: 'the webhook suspended',
      });
      await healthyCaughtUp();
      const waiting = await payloadsOf('gone');
      expect(waiting.map((p) => p.status)).toEqual(waiting.map(() => 'pending'));

      writeFileSync(file, config(true, moved.url));
      if (how === 'a restart') {
        await stopService(run);
        await startService(file);
      } else run.child.kill('SIGHUP');
      await eventually(
        async () => ((await payloadsOf('gone')).every((p) => p.status === 'delivered') ? true : undefined),
        { timeoutMs: 60_000, what: 'every payload delivered to the new url' },
      );
      expect(moved.requests.map((request) => request.body)).toEqual(waiting.map((p) => p.body));
      expect(gone.requests).toHaveLength(1);
      expect(await goneSince()).toBeNull();
    },
  );
});

describe('retry.disableOnGone: false (the default)', () => {
  it(
    'dead-letters every payload a 410 answers as rejected, as every 4xx, and suspends nothing',
    { timeout: 120_000 },
    async () => {
      const file = path.join(tempDirectory('aw-gone-'), 'config.yaml');
      writeFileSync(file, config(false));
      await startService(file);
      await createAssets(5);
      await healthyCaughtUp();
      await eventually(
        async () => {
          const rows = await payloadsOf('gone');
          return rows.length === 5 && rows.every((p) => p.status === 'dead_lettered') ? rows : undefined;
        },
        { timeoutMs: 40_000, what: 'every payload of the 410 webhook dead-lettered' },
      ).then((rows) => expect(rows.map((p) => p.dead_letter_reason)).toEqual(rows.map(() => 'rejected')));
      expect(gone.requests).toHaveLength(5);
      expect(await goneSince()).toBeNull();
    },
  );
});
