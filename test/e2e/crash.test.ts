import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { startCli } from '../helpers/cli.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

const db = useTestDatabase();

it(
  'a worker killed with SIGKILL between claim and commit loses nothing and duplicates nothing',
  { timeout: 90_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    const file = path.join(tempDirectory('aw-crash-'), 'config.yaml');
    writeFileSync(
      file,
      `assetUpdater:
  intervalSeconds: 1
  network: { allowPrivateAddresses: true }
  webhooks:
    - { id: crm, url: "${receiver.url}", enabled: true, batchSize: 10 }
`,
    );
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 50) g');

    // Hold a lock the coalescer's chunk transaction needs after it has claimed
    // its rows: the run blocks between claim and commit.
    const blocker = await db.pool.connect();
    await blocker.query('begin');
    await blocker.query('lock table asset_webhooks.events in exclusive mode');
    const first = startCli(['run', '--database-url', db.url, '--config', file]);
    try {
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            "select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'events' and not l.granted",
          );
          return (rows[0]?.n ?? 0) > 0 ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'the coalescer to block inside its chunk transaction' },
      );
      const { rows: locked } = await db.pool.query<{ n: number }>(
        'select count(*)::int as n from asset_webhooks.outbox',
      );
      expect(locked[0]!.n).toBe(50);
      first.child.kill('SIGKILL');
      await first.exited;
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }

    const second = startCli(['run', '--database-url', db.url, '--config', file]);
    try {
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            "select count(*)::int as n from asset_webhooks.payloads where status = 'delivered'",
          );
          return rows[0]!.n === 5 ? true : undefined;
        },
        { timeoutMs: 30_000, what: 'five payloads delivered' },
      );
      const delivered = receiver.requests.flatMap(
        (r) => (JSON.parse(r.body) as { events: Array<{ eventId: string; assetId: number }> }).events,
      );
      expect(delivered.map((e) => e.assetId)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      expect(new Set(delivered.map((e) => e.eventId)).size).toBe(50);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
      await receiver.close();
    }
  },
);

it(
  'a run process killed with SIGKILL mid-request: another process sends the payload again within a minute, and the rest once',
  { timeout: 120_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    // The first request never gets an answer: it is in flight when its process dies.
    receiver.respond = (_request, index) => (index === 0 ? 'hang' : 200);
    const file = path.join(tempDirectory('aw-crash-'), 'config.yaml');
    writeFileSync(
      file,
      `assetUpdater:
  intervalSeconds: 1
  requestTimeoutSeconds: 5
  network: { allowPrivateAddresses: true }
  webhooks:
    - { id: crm, url: "${receiver.url}", enabled: true, batchSize: 1 }
`,
    );
    const survivor = startCli(['run', '--database-url', db.url, '--config', file]);
    const victim = startCli(['run', '--database-url', db.url, '--config', file]);
    try {
      await eventually(
        async () =>
          [survivor, victim].every((p) => p.output.stderr.includes('asset-webhooks running')) ? true : undefined,
        { timeoutMs: 20_000, what: 'both processes to run' },
      );
      await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 5) g');
      await receiver.waitFor(1, 20_000);
      // Kill whichever process holds the hanging request.
      const {
        rows: [inFlight],
      } = await db.pool.query<{ process_id: string }>(
        'select process_id from asset_webhooks.attempts where outcome is null',
      );
      const [dying, living] = victim.output.stderr.includes(inFlight!.process_id)
        ? [victim, survivor]
        : [survivor, victim];
      expect(dying.output.stderr).toContain(inFlight!.process_id);
      dying.child.kill('SIGKILL');
      await dying.exited;
      const killedAt = Date.now();
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            "select count(*)::int as n from asset_webhooks.payloads where status = 'delivered'",
          );
          return rows[0]!.n === 5 ? true : undefined;
        },
        { timeoutMs: 60_000, what: 'every payload delivered by the process that lives' },
      );
      expect(Date.now() - killedAt).toBeLessThan(60_000);
      // Strict order held, and only the payload in flight at the crash was sent twice.
      const assets = receiver.requests.map(
        (r) => (JSON.parse(r.body) as { events: Array<{ assetId: number }> }).events[0]!.assetId,
      );
      expect(assets).toEqual([1, 1, 2, 3, 4, 5]);
      const { rows: attempts } = await db.pool.query(
        "select error_class, outcome from asset_webhooks.attempts where outcome = 'retry' order by payload_id",
      );
      expect(attempts).toEqual([{ error_class: 'interrupted', outcome: 'retry' }]);
      expect(living.child.exitCode).toBeNull();
    } finally {
      for (const p of [survivor, victim])
        if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
      await Promise.all([survivor.exited, victim.exited]);
      await receiver.close();
    }
  },
);
