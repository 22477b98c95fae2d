import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runCli, startCli } from '../helpers/cli.js';
import { eventually } from '../helpers/receiver.js';
import { openWebhook, registerWebhooks, resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A real backfill process interrupted by SIGINT, then run again: what it
// reports excluded by each check covers the whole backfill, as its totals do.

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
/** More than one read chunk (1000): the interrupted run leaves assets to the resumed one. */
const ASSETS = 2500;
let configPath: string;

beforeAll(async () => {
  await resetData(db.pool);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, $1::int) g', [ASSETS]);
  // Every fifth asset lacks the keyword the webhook filters on: 500 excluded by filter:1; 5 in the Trash.
  await db.pool.query(
    "insert into asset_keywords (asset_id, value) select g, 'summer' from generate_series(1, $1::int) g where g % 5 <> 0",
    [ASSETS],
  );
  await db.pool.query('update assets set trashed_at = now() where asset_id in (1, 2, 3, 4, 2001)');
  await db.pool.query('truncate asset_webhooks.outbox');
  await registerWebhooks(db.pool, [openWebhook('crm')]);
  configPath = path.join(tempDirectory('aw-backfill-exclusions-'), 'config.yaml');
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
            batchSize: 100,
            filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['summer'] }],
          },
        ],
      },
    }),
  );
});

interface Result {
  status: string;
  resumed: boolean;
  assetsRead: number;
  eventsSent: number;
  excluded: number;
  excludedBy: Record<string, number>;
}

const sum = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);

it('reports excludedBy over the whole backfill once resumed, adding up to its excluded', async () => {
  const args = ['backfill', '--webhook', 'crm', '--config', configPath, '--database-url', db.url, '--json'];
  // Held at its first write to the backfills table, so that the signal surely arrives before its first chunk.
  const holder = await db.pool.connect();
  let interrupted: Result;
  try {
    const holderPid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    await holder.query('begin');
    await holder.query('lock table asset_webhooks.backfills in access exclusive mode');
    const run = startCli(args);
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          'select count(*)::int as n from pg_stat_activity where $1::int = any(pg_blocking_pids(pid))',
          [holderPid],
        );
        return rows[0]!.n > 0 ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'the backfill to wait on the lock' },
    );
    run.child.kill('SIGINT');
    await eventually(async () => (run.output.stderr.includes('stopping after') ? true : undefined), {
      what: 'the stopping line',
    });
    await holder.query('rollback');
    expect(await run.exited).toBe(130);
    interrupted = JSON.parse(run.output.stdout) as Result;
  } finally {
    holder.release();
  }
  // One chunk done: some exclusions committed, the rest left to the resumed run.
  expect(interrupted.status).toBe('running');
  expect(interrupted.excluded).toBeGreaterThan(0);
  expect(interrupted.excluded).toBeLessThan(505);
  expect(sum(interrupted.excludedBy)).toBe(interrupted.excluded);
  const {
    rows: [row],
  } = await db.pool.query<{ excluded_by: Record<string, number> }>(
    "select excluded_by from asset_webhooks.backfills where webhook_id = 'crm'",
  );
  expect(row!.excluded_by).toEqual(interrupted.excludedBy);

  const resumedRun = await runCli(args);
  expect(resumedRun.code).toBe(0);
  const resumed = JSON.parse(resumedRun.stdout) as Result;
  expect(resumed).toMatchObject({
    status: 'completed',
    resumed: true,
    assetsRead: ASSETS,
    eventsSent: ASSETS - 505,
    excluded: 505,
    // 1..4, read by the interrupted run, and 2001, read by the resumed one, are in the Trash.
    excludedBy: { in_trash: 5, 'filter:1': 500 },
  });
});
