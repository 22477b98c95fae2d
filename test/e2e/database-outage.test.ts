import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { nonJsonLines, startCli, type CliProcess } from '../helpers/cli.js';
import { untilFailedAndUp } from '../helpers/database-away.js';
import { receiverConfig } from '../helpers/config.js';
import { databaseProxy, type DatabaseProxy } from '../helpers/database-proxy.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

// `run` as operators run it, with its database behind a proxy that a test
// takes down and brings back: the database restarts, fails over, or the
// network drops, while a delivery is in flight.
const db = useTestDatabase();
const tempDirectory = useTempDirectories();
let proxy: DatabaseProxy | undefined;
let service: CliProcess | undefined;
let receiver: TestReceiver | undefined;

afterEach(async () => {
  service?.child.kill('SIGKILL');
  await service?.exited;
  await receiver?.close();
  await proxy?.close();
  service = undefined;
  receiver = undefined;
  proxy = undefined;
});

async function start(): Promise<{
  proxy: DatabaseProxy;
  service: CliProcess;
  receiver: TestReceiver;
  configFile: string;
}> {
  await resetData(db.pool);
  receiver = await startTestReceiver();
  // Answers after the test has taken the database down.
  receiver.respond = () => new Promise<number>((resolve) => setTimeout(() => resolve(200), 1500));
  proxy = await databaseProxy(new URL(db.url));
  const configFile = path.join(tempDirectory('aw-outage-'), 'config.yaml');
  writeFileSync(configFile, receiverConfig([{ id: 'crm', url: receiver.url }]));
  service = startCli(['run', '--database-url', proxy.url, '--config', configFile], { env: { LOG_LEVEL: 'info' } });
  const started = service;
  await eventually(async () => (started.output.stderr.includes('asset-webhooks running') ? true : undefined), {
    timeoutMs: 20_000,
    what: 'the service to start',
  });
  return { proxy, service, receiver, configFile };
}

async function statuses(): Promise<string[]> {
  const { rows } = await db.pool.query<{ status: string }>(
    'select status from asset_webhooks.payloads order by payload_id',
  );
  return rows.map((row) => row.status);
}

it(
  'records a delivery the receiver answered while the database was away, once it is back: no crash, no second POST',
  { timeout: 90_000 },
  async () => {
    const { proxy, service, receiver, configFile } = await start();
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1);
    proxy.down();
    // The receiver answers 200 meanwhile; the service cannot record it.
    await eventually(
      async () => (service.output.stderr.includes('could not record a delivery attempt') ? true : undefined),
      { timeoutMs: 15_000, what: 'the failed write to be logged' },
    );
    await untilFailedAndUp(service);

    // A reload while the database is away applies, and is recorded when it returns.
    writeFileSync(
      configFile,
      receiverConfig([
        { id: 'crm', url: receiver.url },
        { id: 'shop', url: receiver.url, enabled: false },
      ]),
    );
    service.child.kill('SIGHUP');
    await eventually(
      async () =>
        service.output.stderr.includes('could not record the configuration in the database') ? true : undefined,
      { timeoutMs: 10_000, what: 'the reload to be logged' },
    );
    expect(service.child.exitCode).toBeNull();

    proxy.up();
    await eventually(async () => ((await statuses()).join() === 'delivered' ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the payload to be recorded as delivered',
    });
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ webhook_id: string }>(
          'select webhook_id from asset_webhooks.webhooks order by webhook_id',
        );
        return rows.map((row) => row.webhook_id).join() === 'crm,shop' ? true : undefined;
      },
      { timeoutMs: 10_000, what: 'the reloaded webhooks to be recorded' },
    );
    const { rows: attempts } = await db.pool.query<{ outcome: string; status_code: number }>(
      'select outcome, status_code from asset_webhooks.attempts',
    );
    expect(attempts).toEqual([{ outcome: 'delivered', status_code: 200 }]);
    expect(receiver.requests).toHaveLength(1);

    // And it goes on: the next change is delivered.
    receiver.respond = () => 200;
    await db.pool.query('insert into assets (asset_id) values (2)');
    await receiver.waitFor(2, 20_000);
    expect(service.child.exitCode).toBeNull();
    // What the database outage made our dependencies print is in the JSON log too.
    expect(nonJsonLines(service.output.stderr)).toEqual([]);
  },
);

it('exits 0 on SIGTERM while the database is away with a delivery in flight', { timeout: 90_000 }, async () => {
  const { proxy, service, receiver } = await start();
  await db.pool.query('insert into assets (asset_id) values (1)');
  await receiver.waitFor(1);
  proxy.down();
  service.child.kill('SIGTERM');
  const stoppedAt = Date.now();
  expect(await service.exited).toBe(0);
  // The settle is retried for at most 10 s once stopping, then left to maintenance.
  expect(Date.now() - stoppedAt).toBeLessThan(40_000);
  expect(service.output.stderr).not.toMatch(/\n\s+at .*batchFailJobs/);
  expect(nonJsonLines(service.output.stderr)).toEqual([]);
});

it(
  'exits at once on a second SIGTERM while the stop waits on connections a network device dropped silently',
  { timeout: 90_000 },
  async () => {
    const { proxy, service, receiver } = await start();
    receiver.respond = () => 200;
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1);
    // Every connection of the process is now one the server has ended and the process never hears of.
    proxy.silence();
    service.child.kill('SIGTERM');
    await eventually(
      async () => (service.output.stderr.includes('signal again to exit without waiting') ? true : undefined),
      { timeoutMs: 10_000, what: 'the stop to begin' },
    );
    // The stop waits on its connections: still running three seconds later.
    // A fixed wait: those connections never answer, so no event marks the stop held rather than just begun.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(service.child.exitCode).toBeNull();
    service.child.kill('SIGTERM');
    expect(await service.exited).toBe(143);
    expect(service.output.stderr).toContain('second signal while stopping: exiting now');
    expect(nonJsonLines(service.output.stderr)).toEqual([]);
  },
);
