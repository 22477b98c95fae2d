import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

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
  const result = await runCli(['demo', '--duration', '20'], {}, 120_000);
  expect(result.code).toBe(0);
  const summary = /receivers got: crm (\d+) events in (\d+) payloads, shop (\d+) events in (\d+) payloads/.exec(result.stdout);
  expect(summary, result.stdout + result.stderr).not.toBeNull();
  expect(Number(summary![1])).toBeGreaterThan(0);
  expect(Number(summary![3])).toBeGreaterThan(0);
  expect(result.stdout).toContain('demo database removed.');
  expect(embeddedDirectories().filter((name) => !before.has(name))).toEqual([]);
  expect(postgresProcesses().filter((pid) => !processesBefore.has(pid))).toEqual([]);
}, 150_000);
