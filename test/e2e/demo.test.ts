import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
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
  const result = await runCli(['demo', '--duration', '20'], { DATABASE_URL: db.url }, 120_000);
  expect(result.code).toBe(0);
  const summary = /receivers got: crm (\d+) events in (\d+) payloads, shop (\d+) events in (\d+) payloads/.exec(result.stdout);
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
  const result = await runCli(['demo', '--database-url', db.url, '--duration', '10'], { DATABASE_URL: '' }, 120_000);
  expect(result.code, result.stdout + result.stderr).toBe(0);
  const summary = /receivers got: crm (\d+) events in (\d+) payloads/.exec(result.stdout);
  expect(summary, result.stdout + result.stderr).not.toBeNull();
  expect(Number(summary![1])).toBeGreaterThan(0);
  expect(result.stdout).toContain("the demo's tables stay in");
  expect(result.stdout).not.toContain('starting an embedded PostgreSQL');
  const password = new URL(db.url).password;
  if (password) expect(result.stdout).not.toContain(`:${password}@`);
  const { rows } = await db.pool.query<{ delivered: number }>(
    "select count(*)::int as delivered from asset_webhooks.payloads where webhook_id = 'crm' and status = 'delivered'");
  expect(rows[0]!.delivered).toBe(Number(summary![2]));

  const again = await runCli(['demo', '--database-url', db.url, '--duration', '5'], {}, 60_000);
  expect(again.code).toBe(1);
  expect(again.stderr.trim()).toMatch(/^--database-url: expected an empty database for the demo .*, got .* with schema asset_webhooks, (table asset_\w+, )*table assets$/);
  const { rows: assets } = await db.pool.query<{ n: number }>('select count(*)::int as n from assets');
  expect(assets[0]!.n).toBeGreaterThan(0);
}, 150_000);
