import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { useCleanup } from '../helpers/cleanup.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * Prometheus's own tool on the shipped rules and on what `run` serves:
 * `promtool check rules` and `promtool test rules` (deploy/prometheus/alerts.test.yaml,
 * which must fire every alert), and `promtool check metrics` on a live
 * GET /metrics. PROMTOOL names the binary (CI sets it once it has installed
 * Debian's `prometheus` package, and then a promtool that does not run fails
 * here); without it, promtool is taken from PATH, and where there is none
 * these tests are skipped.
 */

const db = useTestDatabase();
const cleanup = useCleanup();
const tempDirectory = useTempDirectories();

const promtool = process.env.PROMTOOL || 'promtool';
const available = process.env.PROMTOOL !== undefined || spawnSync(promtool, ['--version']).status === 0;
const deployDirectory = fileURLToPath(new URL('../../deploy/prometheus/', import.meta.url));

interface Result {
  readonly code: number | null;
  readonly output: string;
}

/** Runs promtool to completion, with `input` on its stdin; rejects if it cannot be started. */
function runPromtool(args: readonly string[], input = ''): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(promtool, args, { cwd: deployDirectory, stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', (error) => reject(new Error(`expected ${promtool} to run, got ${error.message}`)));
    child.on('close', (code) => resolve({ code, output }));
    child.stdin.end(input);
  });
}

describe.skipIf(!available)(`${promtool} on deploy/prometheus and on GET /metrics`, () => {
  it('check rules: alerts.yaml is valid', async () => {
    const { code, output } = await runPromtool(['check', 'rules', 'alerts.yaml']);
    expect(output).toMatch(/SUCCESS: \d+ rules found/);
    expect(code, output).toBe(0);
  });

  it('test rules: alerts.test.yaml passes and fires every alert of alerts.yaml', async () => {
    const { code, output } = await runPromtool(['test', 'rules', 'alerts.test.yaml']);
    expect(code, output).toBe(0);
    expect(output).toContain('SUCCESS');

    const rules = parse(readFileSync(path.join(deployDirectory, 'alerts.yaml'), 'utf8')) as {
      groups: { rules: { alert?: string }[] }[];
    };
    const alerts = rules.groups.flatMap((group) => group.rules.flatMap((rule) => (rule.alert ? [rule.alert] : [])));
    const tests = parse(readFileSync(path.join(deployDirectory, 'alerts.test.yaml'), 'utf8')) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
    };
    const fired = new Set(
      tests.tests.flatMap((test) =>
        (test.alert_rule_test ?? []).filter((check) => (check.exp_alerts ?? []).length > 0).map((c) => c.alertname),
      ),
    );
    expect(alerts.length).toBeGreaterThan(10);
    expect(alerts.filter((alert) => !fired.has(alert))).toEqual([]);
  });

  it('test rules: a broken expectation fails (the check can fail)', async () => {
    const broken = path.join(tempDirectory('aw-promtool-'), 'broken.test.yaml');
    writeFileSync(
      broken,
      [
        `rule_files: [${JSON.stringify(path.join(deployDirectory, 'alerts.yaml'))}]`,
        'tests:',
        '  - interval: 1m',
        '    input_series: []',
        '    alert_rule_test:',
        '      - eval_time: 10m',
        '        alertname: AssetWebhooksCaptureGaps',
        '        exp_alerts: [{ exp_labels: { severity: critical } }]',
        '',
      ].join('\n'),
    );
    const { code } = await runPromtool(['test', 'rules', broken]);
    expect(code).not.toBe(0);
  });

  it('check metrics: what a run process serves after a delivery, every webhook and label included, lints clean', async () => {
    const receiver = cleanup.close(await startTestReceiver());
    const configFile = path.join(tempDirectory('aw-promtool-'), 'config.yaml');
    writeFileSync(
      configFile,
      receiverConfig([
        { id: 'crm', url: receiver.url },
        { id: 'shop', url: receiver.url, mirror: true, eventTypes: ['Created', 'Edited', 'Deleted', 'Purged'] },
      ]),
    );
    const port = await freePort();
    const run = cleanup.process(startRun({ databaseUrl: db.url, configFile, httpPort: port, httpHost: '127.0.0.1' }));
    await untilRunning(run);
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(2);
    const exposition = await eventually(
      async () => {
        const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        return /asset_webhooks_delivery_attempts_total\{webhook="shop",outcome="delivered"\} 1/.test(body)
          ? body
          : undefined;
      },
      { timeoutMs: 10_000, what: 'the deliveries to show in /metrics' },
    );
    const { code, output } = await runPromtool(['check', 'metrics'], exposition);
    expect(output).toBe('');
    expect(code).toBe(0);
    expect(await stopRun(run)).toBe(0);
  }, 60_000);

  it('check metrics: a gauge named like a counter fails (the check can fail)', async () => {
    const { code, output } = await runPromtool(
      ['check', 'metrics'],
      '# HELP x_active_total Active things.\n# TYPE x_active_total gauge\nx_active_total 1\n',
    );
    expect(output).toContain('non-counter metrics should not have "_total" suffix');
    expect(code).not.toBe(0);
  });
});
