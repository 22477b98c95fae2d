import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli, watchCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { urlAhead } from '../helpers/db-clock.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { untilRunning } from '../helpers/run-process.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { checkoutRoot, installCommit, previousRelease, type InstalledPackage } from '../helpers/releases.js';

// CI's upgrade test: the database of the previous release, migrated and run
// with traffic, then killed mid-delivery and upgraded to the checkout, which
// must deliver everything the release had taken in and everything after.
// Run once, by its own configuration (vitest.upgrade.config.ts).

const db = useTestDatabase({ empty: true });
const temp = useTempDirectories();

/** The failing receiver's retries wait this long; the checkout's clock runs past it instead of the test sleeping. */
const RETRY_DELAY_SECONDS = 600;

let release: InstalledPackage;
const receivers: TestReceiver[] = [];
const processes: CliProcess[] = [];

beforeAll(() => {
  const found = previousRelease();
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: checkoutRoot, encoding: 'utf8' }).trim();
  if (found === null) {
    process.stdout.write(
      `upgrade test: CHANGELOG.md names no release yet (no "## X.Y.Z - DATE" heading): upgrading from HEAD (${head}) itself\n`,
    );
  } else {
    process.stdout.write(`upgrade test: upgrading from ${found.version} at ${found.commit} (${found.foundBy})\n`);
  }
  release = installCommit(found?.commit ?? head, path.join(temp('aw-upgrade-'), 'release'));
}, 600_000);

afterAll(async () => {
  for (const child of processes)
    if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill();
  await Promise.all(processes.map((child) => child.exited));
  await Promise.all(receivers.map((receiver) => receiver.close()));
});

function startRunOf(cli: string, databaseUrl: string, configFile: string): CliProcess {
  const child = watchCli(
    spawn(process.execPath, [cli, 'run', '--database-url', databaseUrl, '--config', configFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  processes.push(child);
  return child;
}

/** The eventIds a receiver was sent, over every request. */
function eventIds(receiver: TestReceiver): Set<string> {
  return new Set(
    receiver.requests.flatMap((request) =>
      (JSON.parse(request.body) as { events: Array<{ eventId: string }> }).events.map((event) => event.eventId),
    ),
  );
}

/** The assetIds a receiver was sent, over every request. */
function assets(receiver: TestReceiver): Set<number> {
  return new Set(
    receiver.requests.flatMap((request) =>
      (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events.map((event) => event.assetId),
    ),
  );
}

it(
  "upgrades the previous release's database with traffic and a SIGKILL mid-delivery, losing nothing",
  { timeout: 300_000 },
  async () => {
    const healthy = await startTestReceiver();
    const failing = await startTestReceiver();
    const rejecting = await startTestReceiver();
    // A mirror webhook's receiver: the set of assets announced to it must survive the upgrade.
    const mirrored = await startTestReceiver();
    receivers.push(healthy, failing, rejecting, mirrored);
    // Slow answers: requests are in flight when the release is killed.
    healthy.respond = () => new Promise<number>((resolve) => setTimeout(() => resolve(200), 100));
    let upgraded = false;
    failing.respond = () => (upgraded ? 200 : 503);
    rejecting.respond = () => 400;
    const configFile = path.join(temp('aw-upgrade-config-'), 'webhooks.yaml');
    writeFileSync(
      configFile,
      receiverConfig(
        [
          { id: 'healthy', url: healthy.url, batchSize: 5 },
          { id: 'failing', url: failing.url, batchSize: 5 },
          { id: 'rejecting', url: rejecting.url, batchSize: 5 },
          { id: 'mirror', url: mirrored.url, batchSize: 5, mirror: true },
        ],
        {
          retry: { delaysSeconds: [RETRY_DELAY_SECONDS, RETRY_DELAY_SECONDS, RETRY_DELAY_SECONDS] },
          // Crash recovery waits for the killed process's requests to time out: not for 30 s.
          requestTimeoutSeconds: 5,
        },
      ),
    );

    const migrated = await runCli(['migrate', '--database-url', db.url, '--binding', 'reference'], {
      cli: release.cli,
    });
    expect(migrated, migrated.stderr).toMatchObject({ code: 0 });

    const old = startRunOf(release.cli, db.url, configFile);
    await untilRunning(old);
    // The release takes in 200 new assets and 100 edits, in three commits.
    await db.pool.query("insert into assets (asset_id, title) select g, 'a' || g from generate_series(1, 100) g");
    await healthy.waitFor(5, 30_000);
    await db.pool.query("update assets set title = 'edited ' || asset_id where asset_id <= 100");
    await db.pool.query("insert into assets (asset_id, title) select g, 'a' || g from generate_series(101, 200) g");
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ dead: number; failed: number; open: number }>(
          `select count(*) filter (where webhook_id = 'rejecting' and status = 'dead_lettered')::int as dead,
                  (select count(*) from asset_webhooks.attempts a join asset_webhooks.payloads p using (payload_id)
                    where p.webhook_id = 'failing' and a.outcome is not null)::int as failed,
                  (select count(*) from asset_webhooks.attempts where outcome is null)::int as open
             from asset_webhooks.payloads`,
        );
        const row = rows[0]!;
        return row.dead >= 5 && row.failed >= 1 && row.open >= 1 ? row : undefined;
      },
      { timeoutMs: 60_000, what: 'dead letters, a failed attempt and requests in flight' },
    );
    old.child.kill('SIGKILL');
    await old.exited;
    const { rows: attemptsBefore } = await db.pool.query<{ key: string; open: boolean }>(
      "select payload_id || '/' || series || '/' || attempt_no as key, outcome is null as open from asset_webhooks.attempts",
    );
    // Killed mid-delivery: an attempt was started and never recorded.
    expect(attemptsBefore.filter((attempt) => attempt.open).length).toBeGreaterThan(0);
    const { rows: deadBefore } = await db.pool.query<{ payload_id: string }>(
      "select payload_id from asset_webhooks.payloads where status = 'dead_lettered' order by payload_id",
    );
    const members = async (): Promise<number[]> =>
      (
        await db.pool.query<{ asset_id: string }>(
          "select asset_id from asset_webhooks.mirror_members where 'mirror' = any(webhooks) order by asset_id",
        )
      ).rows.map((row) => Number(row.asset_id));
    const membersBefore = await members();
    expect(membersBefore.length).toBeGreaterThan(0);
    const { rows: waitingBefore } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'failing' and status <> 'delivered'",
    );
    expect(waitingBefore[0]!.n).toBeGreaterThan(0);

    // The checkout: migrate with the binding, as docs/upgrading.md says, then run.
    const upgrade = await runCli(['migrate', '--database-url', db.url, '--binding', 'reference']);
    expect(upgrade, upgrade.stderr).toMatchObject({ code: 0 });
    upgraded = true;
    // The checkout's clock is past the failing receiver's retry times.
    const current = startRunOf(
      path.join(checkoutRoot, 'bin', 'asset-webhooks.js'),
      urlAhead(db.url, (RETRY_DELAY_SECONDS + 60) * 1000),
      configFile,
    );
    await untilRunning(current);
    // Changes after the upgrade: 50 new assets, 20 edits, then 5 of the new assets deleted (PURGED)
    // once delivered (deleted before coalescing, their CREATED would be excluded as asset_gone).
    await db.pool.query("insert into assets (asset_id, title) select g, 'a' || g from generate_series(201, 250) g");
    await db.pool.query("update assets set title = 'again ' || asset_id where asset_id between 101 and 120");
    await eventually(async () => (assets(healthy).has(250) ? true : undefined), {
      timeoutMs: 60_000,
      what: 'the new assets delivered',
    });
    await db.pool.query('delete from assets where asset_id between 246 and 250');

    const outcomes = async (): Promise<Array<{ webhook_id: string; outcome: string; n: number }>> =>
      (
        await db.pool.query<{ webhook_id: string; outcome: string; n: number }>(
          `select webhook_id, outcome, count(*)::int as n from asset_webhooks.event_outcomes
            where outcome <> 'collapsed' group by 1, 2 order by 1, 2`,
        )
      ).rows;
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ outbox: number; unsettled: number }>(
          `select (select count(*) from asset_webhooks.outbox)::int as outbox,
                  (select count(*) from asset_webhooks.payloads where status in ('open', 'pending'))::int as unsettled`,
        );
        const deleted = await db.pool.query("select 1 from asset_webhooks.events where event_type = 'PURGED' limit 1");
        return rows[0]!.outbox === 0 && rows[0]!.unsettled === 0 && deleted.rowCount === 1 ? true : undefined;
      },
      { timeoutMs: 120_000, what: 'every change coalesced and every payload settled' },
    );
    const byOutcome = await outcomes();
    // Every event reached both live receivers; the rejecting one's are dead letters.
    expect(byOutcome.map(({ webhook_id, outcome }) => `${webhook_id} ${outcome}`)).toEqual([
      'failing delivered',
      'healthy delivered',
      'mirror delivered',
      'rejecting dead_lettered',
    ]);
    const counts = Object.fromEntries(byOutcome.map((row) => [row.webhook_id, row.n]));
    expect(counts.healthy).toBe(counts.failing);
    expect(counts.rejecting).toBe(counts.healthy);
    expect(counts.mirror).toBe(counts.healthy);
    // The mirror's set: every asset announced before the upgrade, and now exactly the assets that exist.
    const membersAfter = await members();
    expect(membersBefore.filter((asset) => !membersAfter.includes(asset))).toEqual([]);
    expect(membersAfter).toEqual(Array.from({ length: 245 }, (_, i) => i + 1));
    for (const [id, receiver] of [
      ['healthy', healthy],
      ['failing', failing],
      ['mirror', mirrored],
    ] as const) {
      const { rows } = await db.pool.query<{ event_id: string }>(
        `select event_id::text from asset_webhooks.event_outcomes where webhook_id = $1 and outcome = 'delivered'`,
        [id],
      );
      const received = eventIds(receiver);
      expect(
        rows.filter((row) => !received.has(row.event_id)),
        `events of ${id} recorded delivered but never received`,
      ).toEqual([]);
    }
    // Every asset, and the changes after the upgrade, reached the live receivers.
    for (const receiver of [healthy, failing, mirrored])
      expect([...assets(receiver)].sort((a, b) => a - b)).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
    // The release's dead letters survive the upgrade.
    const { rows: deadAfter } = await db.pool.query<{ payload_id: string }>(
      "select payload_id from asset_webhooks.dead_letters where webhook_id = 'rejecting'",
    );
    const survivors = new Set(deadAfter.map((row) => row.payload_id));
    expect(deadBefore.filter((row) => !survivors.has(row.payload_id))).toEqual([]);
    // The release's attempts survive too, the interrupted ones closed.
    const { rows: attemptsAfter } = await db.pool.query<{ key: string; open: boolean }>(
      "select payload_id || '/' || series || '/' || attempt_no as key, outcome is null as open from asset_webhooks.attempts",
    );
    const keptAttempts = new Set(attemptsAfter.map((attempt) => attempt.key));
    expect(attemptsBefore.filter((attempt) => !keptAttempts.has(attempt.key))).toEqual([]);
    expect(attemptsAfter.filter((attempt) => attempt.open)).toEqual([]);
    expect(current.child.exitCode).toBeNull();
    process.stdout.write(
      `upgrade test: ${counts.healthy} events per webhook, ${healthy.requests.length} requests to the healthy receiver, ` +
        `${failing.requests.length} to the failing one, ${deadAfter.length} dead letters (${deadBefore.length} from before the upgrade), ` +
        `${membersAfter.length} mirror members (${membersBefore.length} from before)\n`,
    );
  },
);
