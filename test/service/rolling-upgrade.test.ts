import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { runCli, watchCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { answerAfter, eventually, startTestReceiver } from '../helpers/receiver.js';
import { counterSum } from '../helpers/pump-metrics.js';
import { nextRelease } from '../helpers/releases.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { codeSchemaVersion } from '../../src/migrate/sql-files.js';

/** The next release's one new migration: numbered after the checkout's last. */
const CODE_VERSION = codeSchemaVersion();
const PROBE_MIGRATION = `${String(CODE_VERSION + 1).padStart(4, '0')}_rolling_upgrade_probe.sql`;

// A rolling upgrade: the next release's `migrate` commits while processes of
// this one deliver. They must stop claiming and coalescing, let their requests
// in flight end, turn unready and wait for SIGTERM, and the next release's
// processes deliver the rest.

const db = useTestDatabase();
// The second test's own: the first leaves its database at the next release's version.
const moved = useTestDatabase();
const temp = useTempDirectories();

/** A copy of this release with one more, harmless migration: the release after it, for these tests. */
function releaseWithNewerSchema(): ReturnType<typeof nextRelease> {
  return nextRelease(temp('aw-rolling-next-'), {
    [PROBE_MIGRATION]: 'create table asset_webhooks.rolling_upgrade_probe (id integer);\n',
  });
}

/** The attempts of the process that have no outcome yet. */
async function openAttempts(pool: pg.Pool, processId: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    'select count(*)::int as n from asset_webhooks.attempts where process_id = $1 and outcome is null',
    [processId],
  );
  return rows[0]!.n;
}

/**
 * Changes `assets` assets and waits until the run process `old` has at least
 * two requests in flight; answers its process id.
 */
async function untilRequestsInFlight(pool: pg.Pool, old: ReturnType<typeof startRun>, assets: number): Promise<string> {
  await untilRunning(old);
  const processId = /"processId":"([0-9a-f-]+)"/.exec(old.output.stderr)![1]!;
  await pool.query('insert into assets (asset_id) select g from generate_series(1, $1::int) g', [assets]);
  await eventually(async () => ((await openAttempts(pool, processId)) >= 2 ? true : undefined), {
    timeoutMs: 30_000,
    what: 'requests in flight',
  });
  return processId;
}

it(
  "a run process stops claiming once a newer release's migrate commits, stays up unready until SIGTERM, and nothing is lost",
  { timeout: 150_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    // Slow answers: requests are in flight when the schema moves.
    answerAfter(receiver, 1500);
    const configFile = path.join(temp('aw-rolling-'), 'webhooks.yaml');
    writeFileSync(configFile, receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 1, concurrency: 4 }]));
    const port = await freePort();
    const old = startRun({ databaseUrl: db.url, configFile, httpPort: port });
    const next = releaseWithNewerSchema();
    let current: ReturnType<typeof watchCli> | undefined;
    try {
      const processId = await untilRequestsInFlight(db.pool, old, 30);

      const migrated = await runCli(['migrate', '--database-url', db.url], { cli: next.cli });
      expect(migrated, migrated.stderr).toMatchObject({ code: 0 });
      const migratedAt = Date.now();
      await eventually(async () => (old.output.stderr.includes('a newer release must take over') ? true : undefined), {
        timeoutMs: 15_000,
        what: 'the old process to see the schema move',
      });
      const seenAfterMs = Date.now() - migratedAt;
      // At migrate's notification, not at the next of its reads every 5 s.
      expect(seenAfterMs).toBeLessThan(4000);
      await eventually(async () => (old.output.stderr.includes('waiting for SIGTERM') ? true : undefined), {
        timeoutMs: 30_000,
        what: 'its requests in flight to end',
      });
      const moved = old.output.stderr.split('\n').find((line) => line.includes('a newer release must take over'))!;
      expect(JSON.parse(moved)).toMatchObject({ databaseVersion: CODE_VERSION + 1, codeVersion: CODE_VERSION });
      expect(moved).toContain(`schema asset_webhooks is at version ${CODE_VERSION + 1} with functions`);

      // Unready with the reason, alive, and claiming nothing more.
      const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(readyz.status).toBe(503);
      expect(await readyz.json()).toMatchObject({ check: 'schema' });
      expect((await fetch(`http://127.0.0.1:${port}/livez`)).status).toBe(200);
      expect(await openAttempts(db.pool, processId)).toBe(0);
      const attemptsOfOld = async (): Promise<number> =>
        (
          await db.pool.query<{ n: number }>(
            'select count(*)::int as n from asset_webhooks.attempts where process_id = $1',
            [processId],
          )
        ).rows[0]!.n;
      const made = await attemptsOfOld();
      const claimsOfOld = await counterSum(port, 'asset_webhooks_delivery_claims_total');
      // Its claims so far, served still: the check at the end compares a real count.
      expect(claimsOfOld).toBeGreaterThan(0);
      const { rows: waiting } = await db.pool.query<{ n: number }>(
        "select count(*)::int as n from asset_webhooks.payloads where status <> 'delivered'",
      );
      expect(waiting[0]!.n).toBeGreaterThan(0);
      expect(old.child.exitCode).toBeNull();

      // The next release's process delivers the rest.
      current = watchCli(
        spawn(process.execPath, [next.cli, 'run', '--database-url', db.url, '--config', configFile], {
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      await untilRunning(current);
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ delivered: number; all: number }>(
            "select count(*) filter (where status = 'delivered')::int as delivered, count(*)::int as all from asset_webhooks.payloads",
          );
          return rows[0]!.all === 30 && rows[0]!.delivered === 30 ? true : undefined;
        },
        { timeoutMs: 60_000, what: 'every payload delivered by the next release' },
      );
      const assets = new Set(
        receiver.requests.flatMap((request) =>
          (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events.map((event) => event.assetId),
        ),
      );
      expect([...assets].sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      // All the while payloads waited, from its stop to the next release's start and the answers to it
      // (1.5 s each), the old process, still up, made no claim statement and no attempt.
      expect(await counterSum(port, 'asset_webhooks_delivery_claims_total')).toBe(claimsOfOld);
      expect(await attemptsOfOld()).toBe(made);

      expect(await stopRun(old)).toBe(0);
      // No error: every request in flight was recorded.
      expect(old.output.stderr.split('\n').filter((line) => line.includes('"level":50'))).toEqual([]);
      process.stdout.write(`rolling upgrade: the old process saw the move ${seenAfterMs} ms after migrate ended\n`);
    } finally {
      await stopRun(old);
      if (current) await stopRun(current);
      await receiver.close();
    }
  },
);

it(
  "requests in flight whose results the new functions refuse are sent again by the next release's processes once the old one stops",
  { timeout: 150_000 },
  async () => {
    await resetData(moved.pool);
    const receiver = await startTestReceiver();
    answerAfter(receiver, 1500);
    const configFile = path.join(temp('aw-rolling-'), 'webhooks.yaml');
    writeFileSync(
      configFile,
      receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 1, concurrency: 4 }], { requestTimeoutSeconds: 5 }),
    );
    const old = startRun({ databaseUrl: moved.url, configFile });
    const next = releaseWithNewerSchema();
    let current: ReturnType<typeof watchCli> | undefined;
    try {
      const processId = await untilRequestsInFlight(moved.pool, old, 12);
      const migrated = await runCli(['migrate', '--database-url', moved.url], { cli: next.cli });
      expect(migrated, migrated.stderr).toMatchObject({ code: 0 });
      // The next release's settle is one the old code cannot call: here, gone under its name.
      await moved.pool.query('alter function asset_webhooks.complete_attempts rename to complete_attempts_of_next');
      await eventually(async () => (old.output.stderr.includes('waiting for SIGTERM') ? true : undefined), {
        timeoutMs: 30_000,
        what: 'its requests in flight to end',
      });
      expect(old.output.stderr).toContain('could not record a delivery attempt');
      // Left open (a settle already under way at the rename may have been written).
      const unrecorded = await openAttempts(moved.pool, processId);
      expect(unrecorded).toBeGreaterThan(0);
      expect(old.child.exitCode).toBeNull();
      await moved.pool.query('alter function asset_webhooks.complete_attempts_of_next rename to complete_attempts');

      current = watchCli(
        spawn(process.execPath, [next.cli, 'run', '--database-url', moved.url, '--config', configFile], {
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      await untilRunning(current);
      // The old process's lease keeps crash recovery away from its attempts until it stops.
      expect(await stopRun(old)).toBe(0);
      await eventually(
        async () => {
          const { rows } = await moved.pool.query<{ delivered: number; all: number }>(
            "select count(*) filter (where status = 'delivered')::int as delivered, count(*)::int as all from asset_webhooks.payloads",
          );
          return rows[0]!.all === 12 && rows[0]!.delivered === 12 ? true : undefined;
        },
        { timeoutMs: 90_000, what: 'every payload delivered by the next release' },
      );
      const { rows: interrupted } = await moved.pool.query<{ n: number }>(
        "select count(*)::int as n from asset_webhooks.attempts where process_id = $1 and error_class = 'interrupted'",
        [processId],
      );
      expect(interrupted[0]!.n).toBe(unrecorded);
      const assets = new Set(
        receiver.requests.flatMap((request) =>
          (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events.map((event) => event.assetId),
        ),
      );
      expect([...assets].sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    } finally {
      await stopRun(old);
      if (current) await stopRun(current);
      await receiver.close();
    }
  },
);
