import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { runCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/** `run` as a supervisor and a Kubernetes probe see it: its address, its readiness, its exit status. */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();

function configFile(url: string): string {
  const file = path.join(tempDirectory('aw-run-health-'), 'config.yaml');
  writeFileSync(file, receiverConfig([{ id: 'crm', url }]));
  return file;
}

async function status(url: string): Promise<number | string> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    await response.arrayBuffer();
    return response.status;
  } catch (error) {
    return String((error as { cause?: { code?: string } }).cause?.code ?? error);
  }
}

it(
  '--http-host chooses the address: 127.0.0.1 answers there only; without it, every interface answers',
  {
    timeout: 90_000,
  },
  async () => {
    const file = configFile('http://127.0.0.1:9/hook');
    const port = await freePort();
    const loopbackOnly = startRun({ databaseUrl: db.url, configFile: file, httpPort: port, httpHost: '127.0.0.1' });
    try {
      await untilRunning(loopbackOnly);
      expect(await status(`http://127.0.0.1:${port}/livez`)).toBe(200);
      expect(await status(`http://127.0.0.2:${port}/livez`)).toBe('ECONNREFUSED');
    } finally {
      expect(await stopRun(loopbackOnly)).toBe(0);
    }
    const everywhere = startRun({ databaseUrl: db.url, configFile: file, httpPort: port });
    try {
      await untilRunning(everywhere);
      expect(await status(`http://127.0.0.1:${port}/livez`)).toBe(200);
      expect(await status(`http://127.0.0.2:${port}/livez`)).toBe(200);
    } finally {
      expect(await stopRun(everywhere)).toBe(0);
    }
  },
);

it('--http-host refuses a value that is no address, and needs --http-port (exit 2)', { timeout: 60_000 }, async () => {
  const file = configFile('http://127.0.0.1:9/hook');
  const bad = await runCli([
    'run',
    '--database-url',
    db.url,
    '--config',
    file,
    '--http-port',
    '0',
    '--http-host',
    'a b\u001b[31m',
  ]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('--http-host: expected an IP address');
  expect(bad.stderr).toContain('got "a b\\u001b[31m"');
  const alone = await runCli(['run', '--database-url', db.url, '--config', file, '--http-host', '127.0.0.1']);
  expect(alone.code).toBe(2);
  expect(alone.stderr).toContain('--http-host: expected together with --http-port');
});

it(
  '/readyz turns 503 when no coalescing run starts for two intervals plus the margin (graphile-worker stalled), and 200 when runs start again',
  { timeout: 120_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    const port = await freePort();
    const run = startRun({ databaseUrl: db.url, configFile: configFile(receiver.url), httpPort: port });
    const readyz = async (): Promise<{ status: number; body: { check?: string; reason?: string } }> => {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`);
      return { status: response.status, body: (await response.json()) as { check?: string; reason?: string } };
    };
    const blocker = await db.pool.connect();
    try {
      await untilRunning(run);
      await eventually(async () => ((await readyz()).status === 200 ? true : undefined), {
        timeoutMs: 30_000,
        what: '/readyz 200',
      });
      // graphile-worker can neither take nor add a job while this lock is held:
      // no coalescing run starts, and the last one that has an outcome succeeded.
      await blocker.query('begin');
      await blocker.query('lock table graphile_worker._private_jobs in exclusive mode');
      const stalled = await eventually(
        async () => {
          const answer = await readyz();
          return answer.status === 503 ? answer : undefined;
        },
        { timeoutMs: 60_000, what: '/readyz 503 while no coalescing run starts' },
      );
      expect(stalled.body).toMatchObject({
        check: 'coalescing',
        reason: expect.stringMatching(/^no coalescing run has started for \d+s, expected one every 1s/),
      });
      await blocker.query('rollback');
      await eventually(async () => ((await readyz()).status === 200 ? true : undefined), {
        timeoutMs: 30_000,
        what: '/readyz 200 again',
      });
      expect(await stopRun(run)).toBe(0);
    } finally {
      await blocker.query('rollback').catch(() => {});
      blocker.release();
      await stopRun(run);
      await receiver.close();
    }
  },
);

it('run exits 1, saying why, when graphile-worker stops by itself', { timeout: 90_000 }, async () => {
  await resetData(db.pool);
  const receiver = await startTestReceiver();
  const run = startRun({ databaseUrl: db.url, configFile: configFile(receiver.url) });
  try {
    await untilRunning(run);
    // What a newer graphile-worker announces when it migrates the database in
    // a way this one cannot work with: graphile-worker stops its runner.
    // graphile-worker listens a moment after it has started: told again each second until the process ends.
    let told = 0;
    const code = await Promise.race([
      run.exited,
      (async () => {
        for (; told < 30 && run.child.exitCode === null; told++) {
          await db.pool.query(`select pg_notify('worker:migrate', '{"migrationNumber": 999, "breaking": true}')`);
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        }
        return 'still running';
      })(),
    ]);
    expect(code, run.output.stderr.slice(-3000)).toBe(1);
    expect(run.output.stderr).toContain('the worker that runs coalescing stopped by itself');
    expect(run.output.stderr).toContain('exiting with status 1');
  } finally {
    await stopRun(run);
    await receiver.close();
  }
});
