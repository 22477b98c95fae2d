import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startCli, type CliProcess } from '../helpers/cli.js';
import { eventually } from '../helpers/receiver.js';
import { openWebhook, registerWebhooks, resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Real child processes of the CLI and real signals. Each command is held in
// the middle of its work by a lock this test takes on a table it writes, so a
// signal surely arrives while the work is under way.

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
/** More than one read chunk of backfill (1000) and of reconcile (500): one chunk does not finish either. */
const ASSETS = 2500;
let configPath: string;
let holder: pg.PoolClient | undefined;
let holderPid: number | undefined;
const started: CliProcess[] = [];

beforeAll(async () => {
  await resetData(db.pool);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, $1::int) g', [ASSETS]);
  await db.pool.query('truncate asset_webhooks.outbox');
  await registerWebhooks(db.pool, [openWebhook('crm'), openWebhook('copy', { mirror: true })]);
  configPath = path.join(tempDirectory('aw-signals-'), 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      assetUpdater: {
        network: { allowPrivateAddresses: true },
        webhooks: [
          { id: 'crm', url: 'http://127.0.0.1:9/hook', enabled: true },
          { id: 'copy', url: 'http://127.0.0.1:9/copy', enabled: true, mirror: true },
        ],
      },
    }),
  );
});

afterEach(async () => {
  for (const child of started.splice(0)) if (child.child.exitCode === null) child.child.kill('SIGKILL');
  await release();
});

/** Holds `lock table TABLE in access exclusive mode` in an open transaction until release(). */
async function hold(table: string): Promise<void> {
  holder = await db.pool.connect();
  holderPid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  await holder.query('begin');
  await holder.query(`lock table ${table} in access exclusive mode`);
}

async function release(): Promise<void> {
  if (holder === undefined) return;
  await holder.query('rollback');
  holder.release();
  holder = undefined;
}

/**
 * Resolves once a session waits on the lock hold() took: the command's, since
 * nothing else here touches that table. Any session waiting on any lock is
 * not enough: a command an earlier test ended with process.exit leaves its
 * backend waiting until the server notices, and a signal sent on its account
 * could reach the new command before it has loaded its handlers.
 */
async function untilWaitingOnLock(): Promise<void> {
  await eventually(
    async () => {
      const {
        rows: [row],
      } = await db.pool.query<{ n: number }>(
        'select count(*)::int as n from pg_stat_activity where $1::int = any(pg_blocking_pids(pid))',
        [holderPid],
      );
      return row!.n > 0 ? true : undefined;
    },
    { timeoutMs: 30_000, what: 'the command to wait on the lock' },
  );
}

function start(args: readonly string[]): CliProcess {
  const child = startCli([...args, '--database-url', db.url]);
  started.push(child);
  return child;
}

const commands = {
  backfill: { args: () => ['backfill', '--webhook', 'crm', '--config', configPath], table: 'asset_webhooks.backfills' },
  reconcile: {
    args: () => ['reconcile', '--webhook', 'copy', '--config', configPath],
    table: 'asset_webhooks.reconciles',
  },
};

describe('backfill and reconcile stopped by a signal', () => {
  it.each([
    ['backfill', 'SIGTERM', 143],
    ['backfill', 'SIGINT', 130],
    ['reconcile', 'SIGTERM', 143],
    ['reconcile', 'SIGINT', 130],
  ] as const)('%s stops after the chunk in progress commits on %s and exits %i, not 1', async (name, signal, code) => {
    await hold(commands[name].table);
    const child = start(commands[name].args());
    await untilWaitingOnLock();
    child.child.kill(signal);
    await eventually(async () => (child.output.stderr.includes('stopping after') ? true : undefined), {
      what: 'the stopping line',
    });
    await release();
    expect(await child.exited).toBe(code);
    expect(child.output.stderr).toContain(`${name}: ${signal}: stopping after the current chunk commits`);
    expect(child.output.stdout).toContain('interrupted: run the same command again to resume');
  });

  it.each(['backfill', 'reconcile'] as const)(
    '%s stops at once, with 143, on a second SIGTERM while the first waits for its chunk',
    async (name) => {
      await hold(commands[name].table);
      const child = start(commands[name].args());
      await untilWaitingOnLock();
      child.child.kill('SIGTERM');
      await eventually(async () => (child.output.stderr.includes('stopping after') ? true : undefined), {
        what: 'the stopping line',
      });
      // Still blocked by the lock: only the second signal can end it. Without a
      // handler for it, a process that is PID 1 would ignore it.
      child.child.kill('SIGTERM');
      expect(await child.exited).toBe(143);
      expect(child.output.stderr).toContain(`${name}: SIGTERM again: stopping at once`);
    },
  );
});

describe('replay stopped by a signal', () => {
  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)(
    'stops after the batch in progress commits on %s, exits %i, and says how far it got',
    async (signal, code) => {
      // More delivered payloads than one batch (500), in a window of their own per case.
      const from = new Date(Date.UTC(2026, 0, signal === 'SIGTERM' ? 1 : 2)).toISOString();
      await db.pool.query(
        `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at,
                                              series_started_at, delivered_at)
         select 'crm', 'delivered', '{"count":0,"events":[],"webhookTimestamp":"2026-01-01T00:00:00.000Z"}', 66, 0, '{}',
                $1::timestamptz + g * interval '1 second', now(), now()
         from generate_series(1, 1200) g`,
        [from],
      );
      const to = new Date(Date.parse(from) + 86_400_000).toISOString();
      await hold('asset_webhooks.replays');
      const child = start(['replay', '--webhook', 'crm', '--from', from, '--to', to]);
      await untilWaitingOnLock();
      child.child.kill(signal);
      await eventually(async () => (child.output.stderr.includes('stopping after') ? true : undefined), {
        what: 'the stopping line',
      });
      await release();
      expect(await child.exited).toBe(code);
      expect(child.output.stderr).toContain(`replay: ${signal}: stopping after the current batch commits`);
      expect(child.output.stdout).toMatch(
        /^replay \d+ of webhook crm: 500 payloads \(0 events\) queued again \(done up to payload \d+\); interrupted: run the same command again to resume\n$/,
      );
      const { rows } = await db.pool.query<{ status: string; payloads: string }>(
        `select status, payloads::text from asset_webhooks.replays where from_time = $1`,
        [from],
      );
      expect(rows).toEqual([{ status: 'running', payloads: '500' }]);
    },
  );
});

describe('migrate stopped by a signal', () => {
  it('rolls back the transaction under way on SIGTERM and exits 143', async () => {
    await db.pool.query('drop table if exists public.signal_marker');
    const binding = path.join(tempDirectory('aw-signals-binding-'), 'slow-binding.sql');
    // A binding whose transaction has changed something and then waits.
    writeFileSync(binding, 'create table public.signal_marker (x int);\nselect pg_sleep(120);\n');
    const child = start(['migrate', '--binding', binding]);
    await eventually(
      async () => {
        const {
          rows: [row],
        } = await db.pool.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event = 'PgSleep'",
        );
        return row!.n > 0 ? true : undefined;
      },
      { timeoutMs: 30_000, what: "the binding's pg_sleep" },
    );
    const signalled = Date.now();
    child.child.kill('SIGTERM');
    expect(await child.exited).toBe(143);
    expect(Date.now() - signalled).toBeLessThan(10_000);
    expect(child.output.stderr).toContain('migrate: SIGTERM: stopping: rolling back the transaction under way');
    expect(child.output.stderr).toContain('migrate: stopped: the transaction under way was rolled back');
    const {
      rows: [marker],
    } = await db.pool.query<{ present: boolean }>("select to_regclass('public.signal_marker') is not null as present");
    expect(marker!.present).toBe(false);
    // Nothing of it is left running on the server either.
    const {
      rows: [sleeping],
    } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event = 'PgSleep'",
    );
    expect(sleeping!.n).toBe(0);
  });
});
