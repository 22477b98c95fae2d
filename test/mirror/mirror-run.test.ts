import { writeFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import {
  applyOp,
  createFolders,
  expectedSet,
  FILTER_SETS,
  opsOn,
  ReceiverCopy,
  type ReceivedEvent,
} from './workload.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

it(
  'a receiver at concurrency 4 ends with exactly the set, through SIGKILLs of run processes and a reload that changes the filters',
  { timeout: 240_000 },
  async () => {
    await resetData(db.pool);
    await createFolders(db.pool);
    const seed = Date.now() % 1_000_000;
    const [ops] = fc.sample(fc.array(opsOn(30), { minLength: 450, maxLength: 450 }), { numRuns: 1, seed });
    const receiver = await startTestReceiver();
    const copy = new ReceiverCopy();
    // Every ninth request fails (503, retried a second later), so payloads arrive out of order too.
    receiver.respond = (request, index) => {
      if (index % 9 === 4) return 503;
      for (const event of (JSON.parse(request.body) as { events: ReceivedEvent[] }).events) copy.apply(event);
      return 200;
    };
    const file = path.join(tempDirectory('aw-mirror-'), 'config.yaml');
    const write = (set: number): void =>
      writeFileSync(
        file,
        receiverConfig(
          [
            {
              id: 'copy',
              url: receiver.url,
              mirror: true,
              concurrency: 4,
              batchSize: 1,
              resourceTypes: ['Resource'],
              filters: FILTER_SETS[set],
            },
          ],
          { retry: { delaysSeconds: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1] } },
        ),
      );
    const apply = async (from: number, to: number): Promise<void> => {
      for (let i = from; i < to; i += 1) {
        await applyOp(db.pool, ops![i]!);
        // Spread over several coalescing runs (one a second).
        if (i % 3 === 2) await sleep(40);
      }
    };
    write(0);
    let run = startRun({ databaseUrl: db.url, configFile: file });
    try {
      await untilRunning(run);
      await apply(0, 150);
      run.child.kill('SIGKILL');
      await run.exited;
      run = startRun({ databaseUrl: db.url, configFile: file });
      await untilRunning(run);
      await apply(150, 300);
      write(1);
      run.child.kill('SIGHUP');
      await eventually(async () => (run.output.stderr.includes('reconcile queued') ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the reload to queue the reconcile',
      });
      await apply(300, 450);
      run.child.kill('SIGKILL');
      await run.exited;
      run = startRun({ databaseUrl: db.url, configFile: file });
      await untilRunning(run);

      // Settled: nothing captured waits, nothing is in flight, the reconcile is done.
      await eventually(
        async () => {
          const {
            rows: [state],
          } = await db.pool.query<{ waiting: number; unsent: number; running: number; done: number }>(
            `select (select count(*)::int from asset_webhooks.outbox) as waiting,
                    (select count(*)::int from asset_webhooks.payloads where status not in ('delivered', 'dead_lettered')) as unsent,
                    (select count(*)::int from asset_webhooks.reconciles where status = 'running') as running,
                    (select count(*)::int from asset_webhooks.reconciles where status = 'completed') as done`,
          );
          return state!.waiting === 0 && state!.unsent === 0 && state!.running === 0 && state!.done > 0
            ? true
            : undefined;
        },
        { timeoutMs: 150_000, what: `everything delivered and the reconcile completed (seed ${seed})` },
      );
      const { rows: dead } = await db.pool.query('select payload_id from asset_webhooks.dead_letters');
      expect(dead, `seed ${seed}`).toEqual([]);
      expect(copy.active(), `seed ${seed}`).toEqual(await expectedSet(db.pool, 1));
      // The workload did what the test is about: assets left the set, and payloads were sent side by side.
      const received = receiver.requests.flatMap(
        (request) => (JSON.parse(request.body) as { events: ReceivedEvent[] }).events,
      );
      expect(received.filter((event) => event.eventType === 'UNMATCHED').length, `seed ${seed}`).toBeGreaterThan(0);
      // Assets in the Trash were edited, and none of those changes went out.
      const {
        rows: [trashed],
      } = await db.pool.query<{ n: number }>('select count(*)::int as n from asset_webhooks.events where in_trash');
      expect(trashed!.n, `seed ${seed}`).toBeGreaterThan(0);
      // How many requests depends on how many edits each coalescing run collapses, which moves
      // with the machine's load: a floor, not a figure.
      expect(receiver.requests.length, `seed ${seed}`).toBeGreaterThan(20);
      // The ledger and the receiver agree: every event the ledger says was delivered to the webhook
      // arrived, as the type it was sent as, and nothing arrived that the ledger does not send there.
      const arrived = new Map(received.map((event) => [event.eventId, event.eventType]));
      const { rows: ledger } = await db.pool.query<{ event_id: string; outcome: string; sent_as: string | null }>(
        "select event_id, outcome, sent_as from asset_webhooks.event_outcomes where webhook_id = 'copy'",
      );
      const delivered = ledger.filter((row) => row.outcome === 'delivered');
      expect(
        delivered.every((row) => arrived.get(row.event_id) === row.sent_as),
        `seed ${seed}`,
      ).toBe(true);
      expect(new Set(delivered.map((row) => row.event_id)), `seed ${seed}`).toEqual(new Set(arrived.keys()));
      expect(
        ledger.filter((row) => !['delivered', 'excluded', 'collapsed'].includes(row.outcome)),
        `seed ${seed}`,
      ).toEqual([]);
      const { rows: reconciles } = await db.pool.query<{ requested_by: string }>(
        'select requested_by from asset_webhooks.reconciles',
      );
      expect(reconciles.every((row) => row.requested_by.startsWith('run '))).toBe(true);
    } finally {
      await stopRun(run);
      await receiver.close();
    }
  },
);
