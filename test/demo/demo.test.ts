import { execFileSync, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { expect, it } from 'vitest';
import { cliPath, runCli } from '../helpers/cli.js';
import { eventually } from '../helpers/receiver.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase({ empty: true });

function embeddedDirectories(): string[] {
  return readdirSync(os.tmpdir()).filter((name) => name.startsWith('asset-webhooks-pg-'));
}

function postgresProcesses(): string[] {
  try {
    return execFileSync('pgrep', ['-f', 'asset-webhooks-pg-'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

it('npm run demo -- --duration 20 delivers to both receivers and leaves nothing behind', async () => {
  // The suite's own embedded server may be running: only new ones count.
  const before = new Set(embeddedDirectories());
  const processesBefore = new Set(postgresProcesses());
  // DATABASE_URL names a real database here: the plain demo must not use it.
  const result = await runCli(['demo', '--duration', '20'], { env: { DATABASE_URL: db.url }, timeoutMs: 120_000 });
  expect(result.code).toBe(0);
  const summary = /receivers got: crm (\d+) events in (\d+) payloads, shop (\d+) events in (\d+) payloads/.exec(
    result.stdout,
  );
  expect(summary, result.stdout + result.stderr).not.toBeNull();
  expect(Number(summary![1])).toBeGreaterThan(0);
  expect(Number(summary![3])).toBeGreaterThan(0);
  expect(result.stdout).toContain('demo database removed.');
  expect(embeddedDirectories().filter((name) => !before.has(name))).toEqual([]);
  expect(postgresProcesses().filter((pid) => !processesBefore.has(pid))).toEqual([]);
  const { rows } = await db.pool.query("select 1 from pg_namespace where nspname = 'asset_webhooks'");
  expect(rows).toEqual([]);
}, 150_000);

it('demo --database-url runs in the empty database given, keeps its tables there, and refuses a database that has asset tables', async () => {
  const result = await runCli(['demo', '--database-url', db.url, '--duration', '10'], {
    env: { DATABASE_URL: '' },
    timeoutMs: 120_000,
  });
  expect(result.code, result.stdout + result.stderr).toBe(0);
  const summary = /receivers got: crm (\d+) events in (\d+) payloads/.exec(result.stdout);
  expect(summary, result.stdout + result.stderr).not.toBeNull();
  expect(Number(summary![1])).toBeGreaterThan(0);
  expect(result.stdout).toContain("the demo's tables stay in");
  expect(result.stdout).not.toContain('starting an embedded PostgreSQL');
  const password = new URL(db.url).password;
  if (password) expect(result.stdout).not.toContain(`:${password}@`);
  const { rows } = await db.pool.query<{ delivered: number }>(
    "select count(*)::int as delivered from asset_webhooks.payloads where webhook_id = 'crm' and status = 'delivered'",
  );
  expect(rows[0]!.delivered).toBe(Number(summary![2]));

  const again = await runCli(['demo', '--database-url', db.url, '--duration', '5'], { env: {}, timeoutMs: 60_000 });
  expect(again.code).toBe(1);
  expect(again.stderr.trim()).toMatch(
    /^--database-url: expected an empty database for the demo .*, got .* with schema asset_webhooks, (table asset_\w+, )*table assets$/,
  );
  const { rows: assets } = await db.pool.query<{ n: number }>('select count(*)::int as n from assets');
  expect(assets[0]!.n).toBeGreaterThan(0);
}, 150_000);

it('Ctrl-C in a terminal (SIGINT to the whole process group) stops the demo cleanly, with its summary', async () => {
  const before = new Set(embeddedDirectories());
  const processesBefore = new Set(postgresProcesses());
  // A group of its own, as a shell gives a foreground job: the signal below
  // reaches the demo and every process it started, as Ctrl-C does.
  const child = spawn(process.execPath, [cliPath, 'demo'], {
    env: { ...process.env, DATABASE_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.on('close', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  // Until something was delivered to both receivers, so the summary has figures to show.
  const delivered = /\n\s*shop\s+[1-9]/;
  await eventually(async () => (delivered.test(stdout) ? true : undefined), {
    timeoutMs: 90_000,
    what: 'a delivery to the shop receiver',
  }).catch(() => undefined);
  expect(stdout, stdout + stderr).toMatch(delivered);
  // Not a terminal: the commands to try are printed once, with the files they need.
  expect(stdout.match(/Try, in another terminal:/g)).toHaveLength(1);
  expect(stdout).toMatch(/export ASSET_WEBHOOKS_CONFIG=\S+demo-config\.yaml/);
  process.kill(-child.pid!, 'SIGINT');
  expect(await exited, stdout + stderr).toBe(0);
  expect(stdout).toMatch(/stopping\. receivers got: crm [1-9]\d* events in \d+ payloads, shop [1-9]\d* events/);
  expect(stdout).toMatch(/dead letters: \d+/);
  expect(stdout).toContain('demo database removed.');
  expect(stderr).not.toMatch(/error|shutting down/i);
  expect(embeddedDirectories().filter((name) => !before.has(name))).toEqual([]);
  expect(postgresProcesses().filter((pid) => !processesBefore.has(pid))).toEqual([]);
}, 150_000);
