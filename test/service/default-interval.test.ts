import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The default interval (60 s), as the other tests' 1 s interval, is scheduled
// by the SQL tick: runs start on whole minutes, and a process that starts in
// the middle of a minute waits for the next one. This test runs the default
// for real: it costs up to a minute of wall time.
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
    writeFileSync(configFile, receiverConfig([{ id: 'crm', url: receiver.url }], { intervalSeconds: null }));
    service = startCli(['run', '--database-url', db.url, '--config', configFile], { env: { LOG_LEVEL: 'info' } });
    const started = service;
    await eventually(async () => (started.output.stderr.includes('asset-webhooks running') ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the service to start',
    });
    expect(started.output.stderr).toContain('"intervalSeconds":60');

    const insertStartedAt = Date.now();
    await db.pool.query('insert into assets (asset_id) values (1)');
    const committedAt = Date.now();
    // No run before the first minute boundary after the insert began can see
    // the row; the run at the first boundary after the commit must. They are
    // the same boundary unless one fell during the insert.
    const earliest = Math.ceil(insertStartedAt / 60_000) * 60_000;
    const latest = Math.ceil(committedAt / 60_000) * 60_000;
    // At most a minute to the next boundary, plus the run and the delivery.
    await receiver.waitFor(1, 75_000);
    const receivedAt = receiver.requests[0]!.at;
    const events = (JSON.parse(receiver.requests[0]!.body) as { events: Array<{ eventType: string; assetId: number }> })
      .events;
    expect(events.map((event) => [event.eventType, event.assetId])).toEqual([['CREATED', 1]]);

    // Not before that minute boundary (no tick, no early run)…
    expect(receivedAt).toBeGreaterThanOrEqual(earliest - 100);
    // …every run the service made started on a whole minute…
    const { rows } = await db.pool.query<{ started: Date; second: number; events: number }>(
      'select started_at as started, extract(second from started_at)::float8 as second, events from asset_webhooks.coalesce_runs order by run_id',
    );
    expect(rows.length).toBeGreaterThanOrEqual(1);
    for (const row of rows) expect(row.second).toBeLessThan(5);
    // …and the one that carried the event was the cron's run at that boundary
    // (its events count commits before the payload is dispatched).
    const carrying = rows.filter((row) => row.events > 0);
    expect(carrying.map((row) => row.events)).toEqual([1]);
    expect(carrying[0]!.started.getTime()).toBeGreaterThanOrEqual(earliest - 100);
    expect(carrying[0]!.started.getTime()).toBeLessThan(latest + 5_000);
  }, 100_000);
});
