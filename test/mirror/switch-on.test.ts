import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import type { ReceivedEvent } from './workload.js';

/**
 * `mirror: true` set on a webhook that delivered as a plain one (CONTRACT 7,
 * "Mirror switched on"): its set is seeded from its delivery history and
 * reconciled, so an asset the receiver got while the webhook was plain is
 * unmatched once it leaves the filters, and one whose history retention
 * removed is sent again, whether the switch came by a reload or by a restart
 * with the new document. Real `run` processes, a real
 * receiver.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const filters = [{ filterKind: 'keywords', condition: 'ANY', value: ['shop'] }];

const runs: CliProcess[] = [];
const receivers: TestReceiver[] = [];
afterEach(async () => {
  for (const run of runs.splice(0)) await stopRun(run);
  for (const receiver of receivers.splice(0)) await receiver.close();
});

const events = (receiver: TestReceiver): ReceivedEvent[] =>
  receiver.requests.flatMap((request) => (JSON.parse(request.body) as { events: ReceivedEvent[] }).events);

const settled = async (): Promise<true | undefined> => {
  const {
    rows: [state],
  } = await db.pool.query<{ waiting: number; unsent: number }>(
    `select (select count(*)::int from asset_webhooks.outbox) as waiting,
            (select count(*)::int from asset_webhooks.payloads where status <> 'delivered') as unsent`,
  );
  return state!.waiting === 0 && state!.unsent === 0 ? true : undefined;
};

/** A plain webhook's history: assets 1..3 delivered, 3 then edited out of the filters, 5 delivered then purged. */
async function plainHistory(): Promise<{ receiver: TestReceiver; file: string; run: CliProcess; told: number }> {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
  const receiver = await startTestReceiver();
  receivers.push(receiver);
  const file = path.join(tempDirectory('aw-switch-on-'), 'config.yaml');
  writeFileSync(file, receiverConfig([{ id: 'copy', url: receiver.url, filters }]));
  const run = startRun({ databaseUrl: db.url, configFile: file });
  runs.push(run);
  await untilRunning(run);
  for (const id of [1, 2, 3, 4, 5]) {
    await db.pool.query('insert into assets (asset_id) values ($1)', [id]);
    if (id !== 4) await db.pool.query("insert into asset_keywords (asset_id, value) values ($1, 'shop')", [id]);
  }
  await eventually(settled, { timeoutMs: 30_000, what: 'the creates delivered' });
  await db.pool.query("delete from asset_keywords where asset_id = 3 and value = 'shop'"); // excluded: a plain webhook is not told
  await db.pool.query('delete from assets where asset_id = 5'); // PURGED
  await eventually(settled, { timeoutMs: 30_000, what: 'the purge delivered' });
  const told = events(receiver);
  expect(new Set(told.map((event) => event.assetId))).toEqual(new Set([1, 2, 3, 5]));
  expect(told.at(-1)).toMatchObject({ eventType: 'PURGED', assetId: 5 });
  expect(told.map((event) => event.eventType)).not.toContain('UNMATCHED');
  // Asset 1's events are gone, as retention removes them after its days: the history no longer
  // shows that the receiver got it, so the seed leaves it out and the reconcile sends it again.
  const { rowCount } = await db.pool.query('delete from asset_webhooks.events where asset_id = 1');
  expect(rowCount).toBeGreaterThan(0);
  return { receiver, file, run, told: told.length };
}

/**
 * What happens once the switch is in use: 1 (beyond the history) sent again by the reconcile as
 * EDITED, 3 unmatched by it, 2 unmatched when it leaves the filters.
 */
async function expectUnmatchedAfterSwitch(run: CliProcess, receiver: TestReceiver, toldBefore: number): Promise<void> {
  await eventually(async () => (run.output.stderr.includes('reconcile completed') ? true : undefined), {
    timeoutMs: 30_000,
    what: 'the reconcile of the switch to complete',
  });
  expect(run.output.stderr).toContain("mirror set seeded from the webhook's delivery history: 2 assets");
  expect(run.output.stderr).toContain('reconcile started: mirror: true was set on the webhook');
  await eventually(settled, { timeoutMs: 30_000, what: "the reconcile's events delivered" });
  // Seeded with 2 and 3, the reconcile sends 2 no EDITED again; 1, beyond the history, gets one;
  // 3, which left the filters while plain, is unmatched.
  const afterSwitch = (): string[] =>
    events(receiver)
      .slice(toldBefore)
      .map((event) => `${event.eventType} ${event.assetId}`);
  expect(afterSwitch().toSorted()).toEqual(['EDITED 1', 'UNMATCHED 3']);
  await db.pool.query("delete from asset_keywords where asset_id = 2 and value = 'shop'");
  await eventually(async () => (afterSwitch().length === 3 ? true : undefined), {
    timeoutMs: 30_000,
    what: 'the UNMATCHED of asset 2',
  });
  expect(afterSwitch()[2]).toBe('UNMATCHED 2');
}

it(
  'by a reload: the set is seeded from what the plain webhook delivered, and an asset leaving the filters is unmatched',
  { timeout: 120_000 },
  async () => {
    const { receiver, file, run, told } = await plainHistory();
    writeFileSync(file, receiverConfig([{ id: 'copy', url: receiver.url, filters, mirror: true }]));
    run.child.kill('SIGHUP');
    await expectUnmatchedAfterSwitch(run, receiver, told);
    expect(run.output.stderr).toContain('reconcile queued: mirror: true was set on the webhook');
  },
);

it('by a restart with the new document: the same, queued at start-up', { timeout: 120_000 }, async () => {
  const { receiver, file, run, told } = await plainHistory();
  await stopRun(run);
  writeFileSync(file, receiverConfig([{ id: 'copy', url: receiver.url, filters, mirror: true }]));
  const restarted = startRun({ databaseUrl: db.url, configFile: file });
  runs.push(restarted);
  await untilRunning(restarted);
  expect(restarted.output.stderr).toContain('reconcile queued: mirror: true was set on the webhook');
  await expectUnmatchedAfterSwitch(restarted, receiver, told);
});
