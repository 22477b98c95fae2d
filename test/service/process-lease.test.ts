import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { recoverOrphans } from '../../src/delivery/recover.js';
import { createPool } from '../../src/db/connect.js';
import { holdProcessLease, runApplicationName } from '../../src/service/process-lease.js';
import { runCli, startCli } from '../helpers/cli.js';
import { startTestService } from '../helpers/service.js';
import { receiverConfig } from '../helpers/config.js';
import { testDelivery } from '../helpers/delivery.js';
import { databaseProxy } from '../helpers/database-proxy.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { resetData, silentLogger } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { oneEventBody } from '../helpers/payload-schema.js';
import { settleLeases, sweepsPass } from '../helpers/pump-metrics.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';

// Each `run` process holds a lease (a row of asset_webhooks.session_locks naming its lease session)
// and records its id on every attempt it starts, so that an attempt left
// unfinished by a process that died is closed by crash recovery (every few
// seconds, in every process) once the request timeout has passed.

/**
 * The grace asset_webhooks.process_gone_grace gives a process with a settled
 * lease and the 300 s request timeout of the first test: 300 + 5 s.
 */
const SETTLED_GRACE = 305;

const tempDirectory = useTempDirectories();
const db = useTestDatabase();

/** The process column of a runbook's attempts: backlog-and-lag.sql's in flight, or find-event.sql's for one event. */
async function runbookProcesses(eventId?: string): Promise<string[]> {
  const file = eventId ? 'find-event.sql' : 'backlog-and-lag.sql';
  const runbook = fileURLToPath(new URL(`../../sql/runbooks/${file}`, import.meta.url));
  const { stdout } = await promisify(execFile)('psql', [
    db.url,
    '-X',
    ...(eventId ? ['-v', `event_id=${eventId}`] : []),
    '-f',
    runbook,
  ]);
  const section = eventId
    ? stdout.split('Every delivery attempt')[1]!
    : stdout.split('Attempts in flight')[1]!.split('The last coalescing runs')[0]!;
  return [...section.matchAll(/\|\s*(alive|gone|unknown)\s*$/gm)].map((match) => match[1]!);
}

async function processGone(processId: string): Promise<boolean> {
  const { rows } = await db.pool.query<{ gone: boolean }>('select asset_webhooks.process_gone($1) as gone', [
    processId,
  ]);
  return rows[0]!.gone;
}

it(
  'an attempt left by a run process killed with SIGKILL is closed as interrupted by crash recovery, and sent again',
  { timeout: 90_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    receiver.respond = (_request, index) => (index === 0 ? 'hang' : 200);
    const file = path.join(tempDirectory('aw-lease-'), 'config.yaml');
    // A request timeout far longer than the test: the first attempt stays open until its process dies.
    writeFileSync(
      file,
      receiverConfig([{ id: 'crm', url: receiver.url, concurrency: 1 }], { requestTimeoutSeconds: 300 }),
    );
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 3) g');

    const first = startCli(['run', '--database-url', db.url, '--config', file]);
    const recovery = await testDelivery(
      db.pool,
      receiverConfig([{ id: 'crm', url: receiver.url, concurrency: 1 }], { requestTimeoutSeconds: 300 }),
    );
    let processId: string;
    try {
      await receiver.waitFor(1, 30_000);
      const { rows } = await db.pool.query<{ process_id: string | null; payload_id: number }>(
        'select process_id, payload_id from asset_webhooks.attempts where outcome is null',
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]!.process_id).toMatch(/^[0-9a-f-]{36}$/);
      processId = rows[0]!.process_id!;

      // Alive: even long past the grace, recovery leaves a live process's attempt alone, and trace says it is alive.
      expect(await processGone(processId)).toBe(false);
      await db.pool.query("update asset_webhooks.in_flight set started_at = started_at - interval '1 hour'");
      expect(await recoverOrphans(recovery.context, SETTLED_GRACE)).toBe(0);
      await db.pool.query("update asset_webhooks.in_flight set started_at = started_at + interval '1 hour'");
      const eventId = (JSON.parse(receiver.requests[0]!.body) as { events: Array<{ eventId: string }> }).events[0]!
        .eventId;
      expect((await runCli(['trace', eventId, '--database-url', db.url])).stdout).toContain(
        '-> in progress (its run process is alive)',
      );
      expect(await runbookProcesses()).toEqual(['alive']);
      expect(await runbookProcesses(eventId)).toEqual(['alive']);

      first.child.kill('SIGKILL');
      await first.exited;
      // PostgreSQL ends the dead process's sessions, and its lease with them.
      await eventually(async () => ((await processGone(processId)) ? true : undefined), {
        timeoutMs: 10_000,
        what: "the killed process's lease to be free",
      });
      expect((await runCli(['trace', eventId, '--database-url', db.url])).stdout).toContain(
        '-> interrupted: its run process is gone',
      );
      expect(await runbookProcesses()).toEqual(['gone']);
      expect(await runbookProcesses(eventId)).toEqual(['gone']);

      // Within the grace (the request timeout plus 5 s) it waits, and while its
      // own lease is new; after both, the attempt is closed and the payload freed.
      expect(await recoverOrphans(recovery.context, SETTLED_GRACE)).toBe(0);
      await db.pool.query("update asset_webhooks.in_flight set started_at = started_at - interval '306 seconds'");
      expect(await recoverOrphans(recovery.context, null)).toBe(0);
      expect(await recoverOrphans(recovery.context, SETTLED_GRACE)).toBe(1);
      const { rows: attempts } = await db.pool.query(
        'select attempt_no, outcome, error_class from asset_webhooks.attempts',
      );
      expect(attempts).toEqual([{ attempt_no: 1, outcome: 'retry', error_class: 'interrupted' }]);
    } finally {
      await recovery.close();
      if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill('SIGKILL');
      await first.exited;
    }

    // Closed as interrupted, it is due again at once: a new process sends it.
    const second = startCli(['run', '--database-url', db.url, '--config', file]);
    try {
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ status: string }>('select status from asset_webhooks.payloads');
          return rows.every((row) => row.status === 'delivered') ? true : undefined;
        },
        { timeoutMs: 30_000, what: 'the payload to be delivered by the second process' },
      );
      expect(receiver.requests).toHaveLength(2);
      expect(receiver.requests[1]!.body).toBe(receiver.requests[0]!.body);
      const { rows } = await db.pool.query<{ attempt_no: number; outcome: string; same: boolean }>(
        'select attempt_no, outcome, process_id = $1 as same from asset_webhooks.attempts order by attempt_no',
        [processId],
      );
      expect(rows).toEqual([
        { attempt_no: 1, outcome: 'retry', same: true },
        { attempt_no: 2, outcome: 'delivered', same: false },
      ]);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
      await receiver.close();
    }
  },
);

it(
  'the running service takes another process for dead only once it has held its own lease for a while, then sends its payload again',
  { timeout: 150_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    // Grace: the request timeout (2 s) plus 5 s, once the service's own lease is 15 s old.
    const port = await freePort();
    const running = await startTestService(
      db.url,
      receiverConfig([{ id: 'crm', url: receiver.url, concurrency: 1 }], { requestTimeoutSeconds: 2 }),
      { httpPort: port },
    );
    try {
      // A payload whose attempt a process that is gone started three minutes ago:
      // past the grace, short of the rule for attempts that name no process.
      const deadProcess = '00000000-0000-4000-8000-00000000dead';
      // In one statement with its slot, so that the running service never sees it waiting.
      const {
        rows: [payload],
      } = await db.pool.query<{ payload_id: number }>(
        `with p as (
           insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids,
                                                series_started_at)
           values ('crm', 'pending', $1, length($1), 1, '{}', now() - interval '3 minutes')
           returning payload_id
         )
         insert into asset_webhooks.in_flight (payload_id, webhook_id, series, attempt_no, started_at, process_id)
         select payload_id, 'crm', 1, 1, now() - interval '3 minutes', $2 from p
         returning payload_id`,
        [oneEventBody(), deadProcess],
      );
      expect(await processGone(deadProcess)).toBe(true);

      // Its own lease is new: after an outage every live process takes its lease
      // again within seconds, so until it is 15 s old none is taken for dead,
      // although the pump sweeps (every 5 s): two sweeps pass and leave it open.
      await sweepsPass(port, 2);
      // Not a speed goal: the step means nothing if the lease was already old enough.
      const { rows: young } = await db.pool.query<{ young: boolean }>(
        `select taken_at > asset_webhooks.now() - interval '15 seconds' as young
         from asset_webhooks.session_locks where name like 'process:%' and asset_webhooks.session_lock_held(name)`,
      );
      expect(young).toEqual([{ young: true }]);
      const {
        rows: [inFlight],
      } = await db.pool.query<{ outcome: string | null }>(
        'select outcome from asset_webhooks.attempts where payload_id = $1',
        [payload!.payload_id],
      );
      expect(inFlight).toEqual({ outcome: null });
      expect(receiver.requests).toHaveLength(0);

      // As if it had held its lease 15 s: its next sweep closes the attempt and sends the payload again.
      expect(await settleLeases(db.pool)).toBe(1);
      await receiver.waitFor(1, 30_000);
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ status: string }>(
            'select status from asset_webhooks.payloads where payload_id = $1',
            [payload!.payload_id],
          );
          return rows[0]!.status === 'delivered' ? true : undefined;
        },
        { timeoutMs: 30_000, what: 'the recovered payload to be delivered' },
      );
      const { rows: attempts } = await db.pool.query(
        'select attempt_no, outcome, error_class, process_id = $2 as dead from asset_webhooks.attempts where payload_id = $1 order by attempt_no',
        [payload!.payload_id, deadProcess],
      );
      expect(attempts).toEqual([
        { attempt_no: 1, outcome: 'retry', error_class: 'interrupted', dead: true },
        { attempt_no: 2, outcome: 'delivered', error_class: null, dead: false },
      ]);
    } finally {
      await running.stop();
      await receiver.close();
    }
  },
);

it(
  'takes its lease again when its connection is lost, and gives it up when released',
  { timeout: 30_000 },
  async () => {
    const processId = '00000000-0000-4000-8000-00000000cafe';
    const lease = await holdProcessLease(db.url, processId, silentLogger);
    try {
      expect(await processGone(processId)).toBe(false);
      await db.pool.query(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name like 'asset-webhooks lease %' and datname = current_database()",
      );
      await eventually(async () => ((await processGone(processId)) ? true : undefined), {
        timeoutMs: 10_000,
        what: 'the lease to be lost with its connection',
      });
      await eventually(async () => ((await processGone(processId)) ? undefined : true), {
        timeoutMs: 10_000,
        what: 'the lease to be held again',
      });
    } finally {
      await lease.release();
    }
    expect(await processGone(processId)).toBe(true);
  },
);

it("records the process from the session's application_name, and nothing for any other name", async () => {
  const processId = '00000000-0000-4000-8000-0000000000ab';
  for (const [applicationName, expected] of [
    [runApplicationName(processId), processId],
    ['asset-webhooks run', null],
    ['psql', null],
  ] as const) {
    const pool = createPool(db.url, { max: 1, applicationName });
    try {
      const { rows } = await pool.query<{ id: string | null }>('select asset_webhooks.process_of_session() as id');
      expect(rows[0]!.id).toBe(expected);
    } finally {
      await pool.end();
    }
  }
});

it('reads a process id from the application_name only when it is "asset-webhooks run " and a canonical lower-case UUID, as the equivalent regular expression would', async () => {
  const id = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
  const names = [
    runApplicationName(id),
    `asset-webhooks run ${id} `,
    ` asset-webhooks run ${id}`,
    `asset-webhooks run ${id.toUpperCase()}`,
    `asset-webhooks run ${id.slice(0, -1)}g`,
    `asset-webhooks run ${id.replace(/-/g, '')}aaaa`,
    `asset-webhooks run ${id.slice(0, 8)}${id.slice(9)}-`,
    `asset-webhooks run -${id.slice(0, 8)}${id.slice(9)}`,
    `asset-webhooks run -${id.slice(1)}`,
    `asset-webhooks run ${id.slice(0, 9)}-${id.slice(10)}`,
    `asset-webhooks run ${id.slice(0, 8)}_${id.slice(9)}`,
    `asset-webhooks lease ${id}`,
    `asset-webhooks  run ${id.slice(1)}`,
    'asset-webhooks run 00000000-0000-0000-0000-000000000000',
    'asset-webhooks run ------------------------------------',
    'asset-webhooks',
    '',
  ];
  const matched: string[] = [];
  const client = await db.pool.connect();
  try {
    for (const name of names) {
      await client.query('select set_config($1, $2, false)', ['application_name', name]);
      const { rows } = await client.query<{ id: string | null; oracle: string | null }>(
        `select asset_webhooks.process_of_session() as id,
                substring(current_setting('application_name')
                          from '^asset-webhooks run ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$') as oracle`,
      );
      expect({ name, id: rows[0]!.id }).toEqual({ name, id: rows[0]!.oracle });
      if (rows[0]!.id !== null) matched.push(rows[0]!.id);
    }
    expect(matched).toEqual([id, '00000000-0000-0000-0000-000000000000']);
  } finally {
    await client.query('reset application_name');
    client.release();
  }
});

it(
  'notices a lease connection that a network device dropped silently, and takes the lease again',
  { timeout: 30_000 },
  async () => {
    const processId = '00000000-0000-4000-8000-0000000000cd';
    const proxy = await databaseProxy(new URL(db.url));
    const lease = await holdProcessLease(proxy.url, processId, silentLogger, {
      checkEveryMs: 200,
      answerWithinMs: 300,
    });
    try {
      expect(await processGone(processId)).toBe(false);
      // The server ends the session and frees the lock; the lease's socket hears nothing.
      proxy.silence();
      await eventually(async () => ((await processGone(processId)) ? true : undefined), {
        timeoutMs: 10_000,
        what: 'the server to free the lock',
      });
      await eventually(async () => ((await processGone(processId)) ? undefined : true), {
        timeoutMs: 10_000,
        what: 'the lease to be held again',
      });
      // The row is taken a statement before the process notes it held.
      await eventually(async () => (lease.heldForMs() > 0 ? true : undefined), {
        timeoutMs: 5_000,
        what: 'the process to count its lease as held',
      });
    } finally {
      await lease.release();
      await proxy.close();
    }
  },
);

it('gives the lease up without waiting on a connection that was dropped silently', { timeout: 30_000 }, async () => {
  const processId = '00000000-0000-4000-8000-0000000000ef';
  const proxy = await databaseProxy(new URL(db.url));
  try {
    const lease = await holdProcessLease(proxy.url, processId, silentLogger, { checkEveryMs: 60_000 });
    proxy.silence();
    // Two seconds for the server's answer to the goodbye, then the socket is
    // dropped; waiting for the answer, it would never return (the test's timeout).
    await lease.release();
    expect(await processGone(processId)).toBe(true);
  } finally {
    await proxy.close();
  }
});
