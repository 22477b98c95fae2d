import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { runCli, startCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type ReceivedRequest } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A `run` process claims standby payloads beyond a webhook's concurrency and
// sends one only when one of its requests to that webhook has ended. When it
// is killed while holding standbys that were never sent, crash recovery must
// not count an attempt for them: each keeps every retry of its schedule.

const tempDirectory = useTempDirectories();
const db = useTestDatabase();

function assetOf(request: ReceivedRequest): number {
  return (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events[0]!.assetId;
}

it(
  'gives back the standbys of a killed run process without using an attempt: each is delivered with its full retries',
  { timeout: 120_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    // The first two requests hang until their process dies, so the next two
    // payloads wait in it as standbys. After the crash, the payloads sent
    // before it are answered 200; the standbys fail twice and then succeed,
    // which needs all three attempts of the schedule below.
    const answered = new Map<number, number>();
    receiver.respond = (request, index) => {
      if (index < 2) return 'hang';
      const asset = assetOf(request);
      if (asset <= 2) return 200;
      const seen = (answered.get(asset) ?? 0) + 1;
      answered.set(asset, seen);
      return seen <= 2 ? 500 : 200;
    };
    const webhook = { id: 'crm', url: receiver.url, concurrency: 2, batchSize: 1 };
    const retry = { delaysSeconds: [1, 1] };
    const directory = tempDirectory('aw-standby-');
    const firstConfig = path.join(directory, 'first.yaml');
    // A request timeout longer than the test's wait: the first two requests stay open until the kill.
    writeFileSync(firstConfig, receiverConfig([webhook], { requestTimeoutSeconds: 60, retry }));
    const secondConfig = path.join(directory, 'second.yaml');
    // Crash recovery waits the request timeout plus 5 s after an attempt's start.
    writeFileSync(secondConfig, receiverConfig([webhook], { requestTimeoutSeconds: 2, retry }));

    const first = startCli(['run', '--database-url', db.url, '--config', firstConfig]);
    let second: ReturnType<typeof startCli> | undefined;
    try {
      // One statement: one coalescing run makes the four payloads, in asset order.
      await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 4) g');
      await receiver.waitFor(2, 30_000);
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ open: number }>(
            'select count(*)::int as open from asset_webhooks.attempts where outcome is null',
          );
          return rows[0]!.open === 4 ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'two requests open and two standbys claimed' },
      );
      const { rows: before } = await db.pool.query<{ asset_id: number; attempts: number }>(
        `select e.asset_id::int, f.attempt_no as attempts from asset_webhooks.payloads p
         join asset_webhooks.in_flight f on f.payload_id = p.payload_id
         join asset_webhooks.events e on e.event_id = p.event_ids[1] order by e.asset_id`,
      );
      expect(before).toEqual([1, 2, 3, 4].map((asset) => ({ asset_id: asset, attempts: 1 })));
      // The standbys never left the process.
      expect(receiver.requests.map(assetOf).sort()).toEqual([1, 2]);

      first.child.kill('SIGKILL');
      await first.exited;
      expect(receiver.requests).toHaveLength(2);
      // trace tells a standby never sent from a request that was out when the process died.
      const { rows: events } = await db.pool.query<{ event_id: string }>(
        'select event_id::text from asset_webhooks.events where asset_id in (1, 3) order by asset_id',
      );
      const traced = async (eventId: string): Promise<string> =>
        (await runCli(['trace', eventId, '--database-url', db.url])).stdout;
      await eventually(
        async () =>
          (await traced(events[1]!.event_id)).includes('claimed as a standby and never sent') ? true : undefined,
        { timeoutMs: 10_000, what: 'trace to say the standby was never sent' },
      );
      expect(await traced(events[0]!.event_id)).toContain('-> interrupted: its run process is gone');

      second = startCli(['run', '--database-url', db.url, '--config', secondConfig]);
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ status: string }>('select status from asset_webhooks.payloads');
          return rows.length === 4 && rows.every((row) => row.status !== 'pending') ? true : undefined;
        },
        { timeoutMs: 90_000, what: 'every payload to be delivered or dead-lettered after recovery' },
      );

      const { rows: attempts } = await db.pool.query<{
        asset_id: number;
        status: string;
        attempts: Array<string | null>;
      }>(
        `select e.asset_id::int, p.status,
                array_agg(coalesce(a.error_class, a.status_code::text) || ' ' || a.outcome order by a.attempt_no) as attempts
         from asset_webhooks.payloads p
         join asset_webhooks.events e on e.event_id = p.event_ids[1]
         join asset_webhooks.attempts a on a.payload_id = p.payload_id and a.series = p.series
         group by e.asset_id, p.status order by e.asset_id`,
      );
      expect(attempts).toEqual([
        // Sent before the kill: that request counts as an attempt, closed as interrupted.
        { asset_id: 1, status: 'delivered', attempts: ['interrupted retry', '200 delivered'] },
        { asset_id: 2, status: 'delivered', attempts: ['interrupted retry', '200 delivered'] },
        // Standbys never sent: no attempt recorded for them; all three attempts are theirs.
        { asset_id: 3, status: 'delivered', attempts: ['500 retry', '500 retry', '200 delivered'] },
        { asset_id: 4, status: 'delivered', attempts: ['500 retry', '500 retry', '200 delivered'] },
      ]);
      const sent = receiver.requests.map(assetOf);
      expect([1, 2, 3, 4].map((asset) => sent.filter((one) => one === asset).length)).toEqual([2, 2, 3, 3]);
    } finally {
      for (const process of [first, second]) {
        if (process && process.child.exitCode === null && process.child.signalCode === null)
          process.child.kill('SIGKILL');
        await process?.exited;
      }
      await receiver.close();
    }
  },
);
