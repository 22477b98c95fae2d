import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { connectionBudget, type ConnectionBudget } from '../../src/service/connection-budget.js';
import { runCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * docs/operations.md gives the database connections one `run` process opens,
 * for sizing max_connections, a role's connection limit or a session-mode
 * pooler. A real `run` process, delivering, must stay within them, each kind
 * of connection by its application_name, and open no kind the budget does not name.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
let run: CliProcess | undefined;
let receiver: TestReceiver | undefined;

afterEach(async () => {
  if (run) await stopRun(run);
  await receiver?.close();
  run = undefined;
  receiver = undefined;
});

type Kind = Exclude<keyof ConnectionBudget, 'total'>;

/** The kind of a connection of the service, from its application_name; null for any other name. */
function kindOf(applicationName: string): Kind | 'unknown' | null {
  if (!applicationName.startsWith('asset-webhooks')) return null;
  if (/^asset-webhooks run [0-9a-f-]{36}$/.test(applicationName)) return 'pool';
  if (applicationName === 'asset-webhooks worker') return 'worker';
  if (applicationName === 'asset-webhooks delivery listener') return 'listener';
  if (/^asset-webhooks lease [0-9a-f-]{36}$/.test(applicationName)) return 'lease';
  return 'unknown';
}

/** The service's connections to the test database now, by kind. */
async function countConnections(): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ application_name: string; n: number }>(
    `select application_name, count(*)::int as n from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() group by application_name`,
  );
  const counts: Record<string, number> = {};
  for (const row of rows) {
    const kind = kindOf(row.application_name);
    if (kind === null) continue;
    counts[kind === 'unknown' ? row.application_name : kind] = (counts[kind] ?? 0) + row.n;
  }
  return counts;
}

/**
 * Starts `run` with `args`, delivers a few hundred assets to a receiver that
 * takes four requests at once, and samples pg_stat_activity meanwhile; returns
 * the most connections of each kind seen at once, and of all kinds together.
 */
async function peakConnections(args: readonly string[]): Promise<{ byKind: Record<string, number>; total: number }> {
  await resetData(db.pool);
  receiver = await startTestReceiver();
  const configFile = path.join(tempDirectory('aw-connections-'), 'config.yaml');
  writeFileSync(
    configFile,
    receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 1, concurrency: 4 }], { intervalSeconds: 1 }),
  );
  run = startRun({ databaseUrl: db.url, configFile, httpPort: await freePort(), args });
  await untilRunning(run);
  const byKind: Record<string, number> = {};
  let total = 0;
  const sample = async (): Promise<void> => {
    const counts = await countConnections();
    for (const [kind, n] of Object.entries(counts)) byKind[kind] = Math.max(byKind[kind] ?? 0, n);
    total = Math.max(
      total,
      Object.values(counts).reduce((sum, n) => sum + n, 0),
    );
  };
  const { rows } = await db.pool.query<{ max: number | null }>('select max(asset_id)::int as max from assets');
  const first = (rows[0]?.max ?? 0) + 1;
  for (let batch = 0; batch < 3; batch++) {
    await db.pool.query('insert into assets (asset_id) select g from generate_series($1::int, $2::int) g', [
      first + batch * 100,
      first + batch * 100 + 99,
    ]);
    await sample();
  }
  await eventually(
    async () => {
      await sample();
      return receiver!.requests.length >= 300 ? true : undefined;
    },
    { timeoutMs: 60_000, what: '300 deliveries' },
  );
  await sample();
  return { byKind, total };
}

describe('the database connections of a run process', () => {
  it.each([
    ['the defaults', [], connectionBudget({})],
    [
      '--database-pool-size 6 --concurrency 1',
      ['--database-pool-size', '6', '--concurrency', '1'],
      connectionBudget({ poolSize: 6, concurrency: 1 }),
    ],
  ] as const)(
    'stay within the documented budget with %s, while delivering',
    async (_name, args, budget) => {
      const { byKind, total } = await peakConnections(args);
      // Only the kinds the budget names, each of them open, none beyond its share.
      expect(Object.keys(byKind).sort()).toEqual(['lease', 'listener', 'pool', 'worker']);
      expect(byKind).toMatchObject({ listener: 1, lease: 1 });
      expect(byKind.pool).toBeLessThanOrEqual(budget.pool);
      expect(byKind.worker).toBeLessThanOrEqual(budget.worker);
      expect(total).toBeLessThanOrEqual(budget.total);
      // The process says its budget when it starts.
      expect(run!.output.stderr).toContain(`"databaseConnections":${JSON.stringify(budget)}`);
    },
    90_000,
  );

  it('adds up to 20 with the defaults, as docs/operations.md says', () => {
    expect(connectionBudget({})).toEqual({ pool: 12, worker: 6, listener: 1, lease: 1, total: 20 });
    expect(connectionBudget({ poolSize: 6, concurrency: 1 }).total).toBe(11);
  });

  it('refuses a pool smaller than a coalescing run needs (exit 2, naming the range)', async () => {
    const result = await runCli(['run', '--database-pool-size', '2']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--database-pool-size: expected an integer from 6 to 1000, got "2"');
  });
});
