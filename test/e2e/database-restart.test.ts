import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { nonJsonLines, runCli, startCli, type CliProcess } from '../helpers/cli.js';
import { untilFailedAndUp } from '../helpers/database-away.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startRestartablePostgres, type RestartablePostgres } from '../helpers/restartable-postgres.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

// `run` against a PostgreSQL server this test stops and starts again, as
// pg_ctl does during a restart, while the receiver holds a request: over a
// Unix socket (the server away shows as ENOENT) and over TCP (ECONNREFUSED),
// both after the admin shutdown of every session (57P01). The receiver's
// answer, given while the server is down, is recorded once it is back, and the
// payload is sent once.

const tempDirectory = useTempDirectories();
let server: RestartablePostgres;
let pool: ReturnType<typeof createPool>;
let service: CliProcess | undefined;
let receiver: TestReceiver | undefined;

beforeAll(async () => {
  server = await startRestartablePostgres();
  const migrated = await runCli(['migrate', '--binding', 'reference', '--database-url', server.tcpUrl]);
  expect(migrated.code).toBe(0);
  pool = createPool(server.tcpUrl, { max: 2 });
}, 120_000);
afterAll(async () => {
  await pool?.end();
  await server?.close();
});
afterEach(async () => {
  service?.child.kill('SIGKILL');
  await service?.exited;
  await receiver?.close();
  service = undefined;
  receiver = undefined;
});

async function statuses(): Promise<string[]> {
  const { rows } = await pool.query<{ status: string }>(
    'select status from asset_webhooks.payloads order by payload_id',
  );
  return rows.map((row) => row.status);
}

describe.each([
  ['a Unix socket', () => server.socketUrl],
  ['TCP', () => server.tcpUrl],
])('a server restart over %s with a request in flight', (_transport, url) => {
  it(
    'records the result the receiver gave while the server was down once it is back, and sends the payload once',
    { timeout: 120_000 },
    async () => {
      await resetData(pool);
      receiver = await startTestReceiver();
      // Answers after the test has stopped the server.
      receiver.respond = () => new Promise<number>((resolve) => setTimeout(() => resolve(200), 1500));
      const configFile = path.join(tempDirectory('aw-restart-'), 'config.yaml');
      writeFileSync(configFile, receiverConfig([{ id: 'crm', url: receiver.url }]));
      service = startCli(['run', '--database-url', url(), '--config', configFile], { env: { LOG_LEVEL: 'info' } });
      const running = service;
      await eventually(async () => (running.output.stderr.includes('asset-webhooks running') ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the service to start',
      });

      await pool.query('insert into public.assets (asset_id) values (1)');
      await receiver.waitFor(1, 20_000);
      await server.stop('fast');
      await eventually(
        async () => (running.output.stderr.includes('could not record a delivery attempt') ? true : undefined),
        { timeoutMs: 15_000, what: 'the failed write to be logged' },
      );
      await untilFailedAndUp(running);
      await server.start();

      await eventually(async () => ((await statuses().catch(() => [])).join() === 'delivered' ? true : undefined), {
        timeoutMs: 30_000,
        what: 'the payload to be recorded as delivered',
      });
      const { rows: attempts } = await pool.query('select outcome, status_code from asset_webhooks.attempts');
      expect(attempts).toEqual([{ outcome: 'delivered', status_code: 200 }]);
      expect(receiver.requests).toHaveLength(1);
      // Logged once the write has committed: the line may reach the pipe after the row is seen.
      await eventually(
        async () =>
          running.output.stderr.includes('recorded a delivery attempt once the database answered again')
            ? true
            : undefined,
        { timeoutMs: 10_000, what: 'the late write to be logged' },
      );
      // The log names the payload; its body (the events, up to maxPayloadBytes) stays out of it.
      const retryLines = running.output.stderr
        .split('\n')
        .filter((line) => line.includes('a delivery attempt'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(retryLines.length).toBeGreaterThanOrEqual(2);
      for (const line of retryLines) expect(Object.keys(line)).not.toContain('body');

      // And it goes on: the next change is delivered.
      receiver.respond = () => 200;
      await pool.query('insert into public.assets (asset_id) values (2)');
      await receiver.waitFor(2, 30_000);
      expect(running.child.exitCode).toBeNull();
      expect(nonJsonLines(running.output.stderr)).toEqual([]);
    },
  );
});

/** A line of the service's JSON log. */
interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly component?: string;
  readonly error?: unknown;
}

function graphileWorkerLines(log: string): LogLine[] {
  return log
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as LogLine)
    .filter((line) => line.component === 'graphile-worker');
}

// graphile-worker reports its notify listener's session ended by the restart,
// the UNLISTEN it then tries on that session, and each refused reconnection at
// its error level; it reconnects by itself, so they are warnings, not alerts.
it(
  'logs graphile-worker losing and regaining its connection across a server restart as warnings, never errors',
  { timeout: 60_000 },
  async () => {
    await resetData(pool);
    const configFile = path.join(tempDirectory('aw-restart-logs-'), 'config.yaml');
    // No change is made, so the receiver is never called.
    writeFileSync(configFile, receiverConfig([{ id: 'crm', url: 'http://127.0.0.1:9/hook' }]));
    // debug: graphile-worker's info lines (such as its listener connecting) are logged at debug.
    service = startCli(['run', '--database-url', server.tcpUrl, '--config', configFile], {
      env: { LOG_LEVEL: 'debug' },
    });
    const running = service;
    const listenerConnected = (): number =>
      graphileWorkerLines(running.output.stderr).filter((line) => line.msg.startsWith('Worker connected')).length;
    await eventually(async () => (listenerConnected() === 1 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the listener to connect',
    });

    await server.stop('fast');
    // The lost session, then at least one refused reconnection.
    const listenerErrors = (): LogLine[] =>
      graphileWorkerLines(running.output.stderr).filter((line) => line.msg.startsWith('Error with notify listener'));
    await eventually(async () => (listenerErrors().length >= 2 ? true : undefined), {
      timeoutMs: 15_000,
      what: 'graphile-worker to report its listener lost twice',
    });
    await server.start();
    await eventually(async () => (listenerConnected() === 2 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the listener to reconnect',
    });

    const lines = graphileWorkerLines(running.output.stderr);
    // graphile-worker passes the error of a line as `error`.
    const lost = lines.filter((line) => line.error !== undefined);
    expect(lost.map((line) => line.msg)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Error with notify listener .*: terminating connection due to administrator command/),
        expect.stringMatching(/^Error with notify listener .*: connect ECONNREFUSED/),
        expect.stringMatching(/^Error occurred attempting to UNLISTEN/),
      ]),
    );
    expect(lost.map((line) => [line.level, line.msg])).toEqual(lost.map((line) => [40, line.msg]));
    expect(lines.filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([]);
    expect(running.child.exitCode).toBeNull();
  },
);
