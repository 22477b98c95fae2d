import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startCli, type CliProcess } from '../helpers/cli.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The default interval (60 s) is scheduled by graphile-worker's cron
// (`* * * * *`), not by the SQL tick the other tests use with 1 s. This test
// runs that path for real: it costs up to a minute of wall time.
const db = useTestDatabase();
let service: CliProcess | undefined;
let receiver: TestReceiver | undefined;
let directory: string | undefined;

afterAll(async () => {
  service?.child.kill('SIGKILL');
  await service?.exited;
  await receiver?.close();
  if (directory) rmSync(directory, { recursive: true, force: true });
});

describe('the default 60-second interval', () => {
  it('coalesces at the next whole minute and delivers, with no intervalSeconds configured', async () => {
    receiver = await startTestReceiver();
    directory = mkdtempSync(path.join(os.tmpdir(), 'aw-cron-'));
    const configFile = path.join(directory, 'config.yaml');
    writeFileSync(configFile, `assetUpdater:
  network: { allowPrivateAddresses: true }
  webhooks:
    - { id: crm, url: "${receiver.url}", enabled: true }
`);
    service = startCli(['run', '--database-url', db.url, '--config', configFile], { LOG_LEVEL: 'info' });
    const started = service;
    await eventually(async () => (started.output.stderr.includes('asset-webhooks running') ? true : undefined), 20_000, 'the service to start');
    expect(started.output.stderr).toContain('"intervalSeconds":60');

    await db.pool.query('insert into assets (asset_id) values (1)');
    const committedAt = Date.now();
    await receiver.waitFor(1, 80_000);
    const receivedAt = receiver.requests[0]!.at;
    const events = (JSON.parse(receiver.requests[0]!.body) as { events: Array<{ eventType: string; assetId: number }> }).events;
    expect(events.map((event) => [event.eventType, event.assetId])).toEqual([['CREATED', 1]]);

    // Not before the minute boundary after the commit (no tick, no early run)…
    const nextMinute = Math.ceil(committedAt / 60_000) * 60_000;
    expect(receivedAt).toBeGreaterThanOrEqual(nextMinute - 100);
    // …and every run the service made started on a whole minute.
    const { rows } = await db.pool.query<{ second: number }>(
      'select extract(second from started_at)::float8 as second from asset_webhooks.coalesce_runs order by run_id');
    expect(rows.length).toBeGreaterThanOrEqual(1);
    for (const row of rows) expect(row.second).toBeLessThan(5);
  }, 110_000);
});
