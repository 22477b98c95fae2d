import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { holdProcessLease } from '../../src/service/process-lease.js';
import { startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { databaseProxy } from '../helpers/database-proxy.js';
import { settleLeases } from '../helpers/pump-metrics.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { resetData, silentLogger } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

// During a rolling change, processes with the old and the new document run
// side by side, and a webhook only the old document has is not removed while
// an old process runs. A process counts as gone once its lease is free; a
// live process whose lease connection is lost for a moment must not count as
// gone, or its webhooks' waiting payloads are dead-lettered as
// webhook_removed while it is still sending them.

const tempDirectory = useTempDirectories();
const db = useTestDatabase();

async function processGone(processId: string): Promise<boolean> {
  const { rows } = await db.pool.query<{ gone: boolean }>('select asset_webhooks.process_gone($1) as gone', [
    processId,
  ]);
  return rows[0]!.gone;
}

async function statusesOf(webhookId: string): Promise<Array<{ status: string; reason: string | null }>> {
  const { rows } = await db.pool.query<{ status: string; reason: string | null }>(
    'select status, dead_letter_reason as reason from asset_webhooks.payloads where webhook_id = $1 order by payload_id',
    [webhookId],
  );
  return rows;
}

async function running(process: CliProcess): Promise<void> {
  await eventually(async () => (process.output.stderr.includes('asset-webhooks running') ? true : undefined), {
    timeoutMs: 30_000,
    what: 'the run process to start',
  });
}

it(
  "keeps a live process's webhooks through a lease connection lost for a few seconds, and removes them once the process is gone for the grace",
  { timeout: 180_000 },
  async () => {
    await resetData(db.pool);
    const a = await startTestReceiver();
    const b = await startTestReceiver();
    // b fails: its payload waits a minute for its retry, pending meanwhile.
    b.respond = () => 503;
    // A grace (below) well beyond how long the lease stays free: the cut lasts 2 s, and the lease is
    // taken again at the next of its retries, 3.75 s after the loss (7.75 s at worst).
    const options = { requestTimeoutSeconds: 5, retry: { delaysSeconds: [60] } };
    // The grace crash recovery waits: the request timeout plus 5 s.
    const graceSeconds = options.requestTimeoutSeconds + 5;
    const directory = tempDirectory('aw-blip-');
    const oldConfig = path.join(directory, 'old.yaml');
    writeFileSync(
      oldConfig,
      receiverConfig(
        [
          { id: 'a', url: a.url },
          { id: 'b', url: b.url },
        ],
        options,
      ),
    );
    // The new document has no webhook b.
    const newConfig = path.join(directory, 'new.yaml');
    writeFileSync(newConfig, receiverConfig([{ id: 'a', url: a.url }], options));

    // The old process reaches the database through a proxy the test can cut.
    const proxy = await databaseProxy(new URL(db.url));
    const processes: CliProcess[] = [];
    const run = (url: string, config: string): CliProcess => {
      const started = startCli(['run', '--database-url', url, '--config', config], { env: { LOG_LEVEL: 'info' } });
      processes.push(started);
      return started;
    };
    try {
      const oldProcess = run(proxy.url, oldConfig);
      await running(oldProcess);
      await db.pool.query('insert into assets (asset_id) values (1)');
      await b.waitFor(1, 30_000);
      expect(await statusesOf('b')).toEqual([{ status: 'pending', reason: null }]);
      const {
        rows: [recorded],
      } = await db.pool.query<{ process_id: string }>(
        "select process_id from asset_webhooks.process_configurations where 'b' = any (webhook_ids)",
      );
      const oldId = recorded!.process_id;

      const newProcess = run(db.url, newConfig);
      await running(newProcess);
      // Until the new process has held its own lease 15 s it takes no process for gone at all; its
      // lease is moved that far into its past (the database's clock counts its age) instead of waited.
      const newId = await eventually(
        async () =>
          (
            await db.pool.query<{ process_id: string }>(
              'select process_id from asset_webhooks.process_configurations where process_id <> $1',
              [oldId],
            )
          ).rows[0]?.process_id,
        { timeoutMs: 10_000, what: "the new process's recorded configuration" },
      );
      expect(await settleLeases(db.pool, newId)).toBe(1);
      expect(await statusesOf('b')).toEqual([{ status: 'pending', reason: null }]);

      // The old process's connections, its lease's among them, are lost for a few seconds.
      proxy.down();
      await eventually(async () => ((await processGone(oldId)) ? true : undefined), {
        timeoutMs: 10_000,
        what: "the old process's lease to be free",
      });
      // The new process records its configuration before each coalescing run, every second: it
      // finds the lease free and says since when, and removes nothing within the grace.
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ free: boolean }>(
            'select lease_free_since is not null as free from asset_webhooks.process_configurations where process_id = $1',
            [oldId],
          );
          return rows[0]?.free ? true : undefined;
        },
        { timeoutMs: 10_000, what: "a recording to find the old process's lease free" },
      );
      expect(await statusesOf('b')).toEqual([{ status: 'pending', reason: null }]);
      proxy.up();
      await eventually(async () => ((await processGone(oldId)) ? undefined : true), {
        timeoutMs: 20_000,
        what: 'the old process to take its lease again',
      });
      expect(oldProcess.child.exitCode).toBeNull();

      // The lease is held again: the free spell has ended, and the recordings that follow, whenever
      // they come, count no grace from it. Two of the new process's recordings after the take.
      const {
        rows: [retaken],
      } = await db.pool.query<{ at: Date }>('select asset_webhooks.now() as at');
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ after: boolean }>(
            `select recorded_at > $2::timestamptz + interval '1 second' as after
             from asset_webhooks.process_configurations where process_id <> $1 and 'a' = any (webhook_ids)`,
            [oldId, retaken!.at],
          );
          return rows[0]?.after ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'the new process to record its configuration after the lease was taken again' },
      );
      expect(await statusesOf('b')).toEqual([{ status: 'pending', reason: null }]);
      const { rows: stillThere } = await db.pool.query(
        'select lease_free_since from asset_webhooks.process_configurations where process_id = $1',
        [oldId],
      );
      expect(stillThere).toEqual([{ lease_free_since: null }]);
      expect(newProcess.output.stderr).not.toContain('webhook is in the configuration of no running process');

      // The old process really stops: once its lease has been free for the grace, b is removed.
      oldProcess.child.kill('SIGKILL');
      await oldProcess.exited;
      const {
        rows: [killed],
      } = await db.pool.query<{ at: Date }>('select now() as at');
      await eventually(
        async () => ((await statusesOf('b')).every((payload) => payload.status === 'dead_lettered') ? true : undefined),
        { timeoutMs: 40_000, what: "b's payload to be dead-lettered once the old process is gone" },
      );
      expect(await statusesOf('b')).toEqual([{ status: 'dead_lettered', reason: 'webhook_removed' }]);
      const {
        rows: [after],
      } = await db.pool.query<{ waited: boolean }>(
        `select dead_lettered_at >= $1::timestamptz + make_interval(secs => $2) as waited
         from asset_webhooks.payloads where webhook_id = 'b'`,
        [killed!.at, graceSeconds],
      );
      expect(after).toEqual({ waited: true });
      // Its configuration went with its lease row, which nothing else would remove.
      const { rows: leases } = await db.pool.query('select name from asset_webhooks.session_locks where name = $1', [
        `process:${oldId}`,
      ]);
      expect(leases).toEqual([]);
      // The process logs once its statement has returned, which can be after the test sees the commit.
      await eventually(
        async () =>
          newProcess.output.stderr.includes('webhook is in the configuration of no running process') ? true : undefined,
        { timeoutMs: 10_000, what: 'the new process to log the removal' },
      );
      expect(await statusesOf('a')).toEqual([{ status: 'delivered', reason: null }]);
    } finally {
      for (const process of processes) process.child.kill('SIGKILL');
      await Promise.all(processes.map((process) => process.exited));
      await proxy.close();
      await a.close();
      await b.close();
    }
  },
);

it('takes a process whose lease is free for gone only once it has been free for the grace, and a lease taken again clears it', async () => {
  await resetData(db.pool);
  const recorder = '00000000-0000-4000-8000-00000000a001';
  const other = '00000000-0000-4000-8000-00000000b002';
  await db.pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled) values ('a', 'http://127.0.0.1/a', true), ('b', 'http://127.0.0.1/b', true);
     insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
     values ('b', 'pending', '{}', 2, 0, '{}')`,
  );
  const record = async (grace: number | null): Promise<Array<{ webhook_id: string; dead_lettered: number }>> =>
    (
      await db.pool.query<{ webhook_id: string; dead_lettered: number }>(
        'select * from asset_webhooks.record_configuration($1, $2, $3)',
        [recorder, ['a'], grace],
      )
    ).rows;
  const freeSince = async (): Promise<Array<{ free: boolean }>> =>
    (
      await db.pool.query<{ free: boolean }>(
        'select lease_free_since is not null as free from asset_webhooks.process_configurations where process_id = $1',
        [other],
      )
    ).rows;

  const lease = await holdProcessLease(db.url, other, silentLogger);
  await db.pool.query('select * from asset_webhooks.record_configuration($1, $2)', [other, ['a', 'b']]);
  expect(await record(7)).toEqual([]);
  expect(await freeSince()).toEqual([{ free: false }]);
  await lease.release();

  // Free, and first found so now: counted as running for the grace.
  expect(await record(7)).toEqual([]);
  expect(await freeSince()).toEqual([{ free: true }]);
  // Free for longer than the grace: gone, only with a grace given (the recorder's own lease settled).
  await db.pool.query(
    "update asset_webhooks.process_configurations set lease_free_since = now() - interval '8 seconds' where process_id = $1",
    [other],
  );
  expect(await record(null)).toEqual([]);
  // Taken again, the free spell ends: a later one starts from nothing.
  const again = await holdProcessLease(db.url, other, silentLogger);
  expect(await freeSince()).toEqual([{ free: false }]);
  await again.release();
  expect(await record(7)).toEqual([]);
  expect(await freeSince()).toEqual([{ free: true }]);
  await db.pool.query(
    "update asset_webhooks.process_configurations set lease_free_since = now() - interval '8 seconds' where process_id = $1",
    [other],
  );
  expect(await record(7)).toEqual([{ webhook_id: 'b', dead_lettered: 1 }]);
  expect(await freeSince()).toEqual([]);
});
