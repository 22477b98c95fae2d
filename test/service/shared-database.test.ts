import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { holdProcessLease } from '../../src/service/process-lease.js';
import { receiverConfig } from '../helpers/config.js';
import { useCleanup } from '../helpers/cleanup.js';
import { useProbeRole } from '../helpers/probe-role.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { openWebhook, registerWebhooks, resetData, runCoalesce, silentLogger } from '../helpers/seed.js';
import { startTestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The asset database is shared with the DAM's application, whose role has no
// rights on schema asset_webhooks. Whatever that role does, through public
// (writable by every role before PostgreSQL 15) or with locks, must neither
// run its code as the service's role nor hold the service back. Each test
// acts through such a role, as a security probe did.

const db = useTestDatabase();
const probe = useProbeRole(db);
const cleanup = useCleanup();

/** Functions the service calls with exact argument types that a function of public would match before pg_catalog's polymorphic ones. */
const PLANTED = [
  ['cardinality', 'bigint[]', 'integer', 'pg_catalog.cardinality($1)'],
  ['cardinality', 'text[]', 'integer', 'pg_catalog.cardinality($1)'],
  ['array_length', 'bigint[], integer', 'integer', 'pg_catalog.array_length($1, $2)'],
  ['unnest', 'bigint[]', 'setof bigint', 'pg_catalog.unnest($1)'],
  ['unnest', 'text[]', 'setof text', 'pg_catalog.unnest($1)'],
] as const;

beforeAll(async () => {
  // What the probe's functions write: the role they ran as, and which one.
  await probe.pool.query('create table public.probe_calls (role text, function text)');
  await probe.pool.query('grant insert on public.probe_calls to public');
  for (const [name, args, returns, delegate] of PLANTED) {
    await probe.pool.query(
      `create function public.${name}(${args}) returns ${returns} language sql as $$
         insert into public.probe_calls values (current_user, '${name}(${args})');
         select ${delegate};
       $$`,
    );
  }
});

beforeEach(() => resetData(db.pool));

async function probeCalls(): Promise<Array<{ role: string; function: string }>> {
  const { rows } = await probe.pool.query<{ role: string; function: string }>(
    'select distinct role, function from public.probe_calls order by 2',
  );
  return rows;
}

describe('a role without rights on asset_webhooks', () => {
  it("gets no function of its own run by a run process's coalescing, delivery and recording", async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const service = await startTestService(
      db.url,
      receiverConfig([
        { id: 'crm', url: receiver.url, concurrency: 2 },
        { id: 'shop', url: receiver.url, concurrency: 1, mirror: true },
      ]),
    );
    try {
      await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 5) g');
      await receiver.waitFor(2, 20_000);
      await db.pool.query("update assets set title = 'x'");
      await receiver.waitFor(4, 20_000);
    } finally {
      await service.stop();
    }
    const { rows } = await db.pool.query<{ status: string }>(
      'select distinct status from asset_webhooks.payloads order by 1',
    );
    expect(rows).toEqual([{ status: 'delivered' }]);
    expect(await probeCalls()).toEqual([]);
  });

  it('cannot hold coalescing back: the old advisory key is nothing, the lock row out of reach', async () => {
    const holder = await probe.pool.connect();
    try {
      await holder.query('select pg_advisory_lock(7200531002)');
      await expectDenied(holder, 'lock table asset_webhooks.session_locks in access exclusive mode', true);
      await expectDenied(holder, 'select from asset_webhooks.session_locks for update');
      await expectDenied(
        holder,
        "insert into asset_webhooks.session_locks values ('coalesce', pg_backend_pid(), now())",
      );
      const webhook = openWebhook('crm');
      await registerWebhooks(db.pool, [webhook]);
      await db.pool.query('insert into assets (asset_id) values (1)');
      const started = performance.now();
      const result = await runCoalesce(db.pool, [webhook]);
      expect(result.runId).not.toBeNull();
      expect(result.events).toBe(1);
      // It did not wait for the probe's lock either.
      expect(performance.now() - started).toBeLessThan(4000);
    } finally {
      await holder.query('select pg_advisory_unlock_all()');
      holder.release();
    }
  });

  it("cannot hold a webhook's delivery back: the old claim key is nothing, the webhook's row out of reach", async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const holder = await probe.pool.connect();
    const service = await startTestService(db.url, receiverConfig([{ id: 'w2', url: receiver.url }]));
    try {
      await holder.query("select pg_advisory_lock(hashtextextended('asset_webhooks.claim:w2', 0))");
      await expectDenied(holder, 'lock table asset_webhooks.webhooks in access exclusive mode', true);
      await expectDenied(holder, "select from asset_webhooks.webhooks where webhook_id = 'w2' for update");
      await expectDenied(holder, "select from asset_webhooks.payloads where webhook_id = 'w2' for update");
      await db.pool.query('insert into assets (asset_id) values (1)');
      await receiver.waitFor(1, 15_000);
    } finally {
      await service.stop();
      await holder.query('select pg_advisory_unlock_all()');
      holder.release();
    }
  });

  it("cannot hold back a run process's recording of its configuration, which its start and every coalescing run make", async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const holder = await probe.pool.connect();
    try {
      await holder.query("select pg_advisory_lock(hashtextextended('asset_webhooks.record_configuration', 0))");
      await expectDenied(holder, 'lock table asset_webhooks.process_configurations in access share mode', true);
      const started = startTestService(db.url, receiverConfig([{ id: 'crm', url: receiver.url }]));
      const service = await Promise.race([
        started,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('the service did not start within 10 s')), 10_000),
        ),
      ]);
      try {
        await db.pool.query('insert into assets (asset_id) values (1)');
        await receiver.waitFor(1, 15_000);
      } finally {
        await service.stop();
      }
    } finally {
      await holder.query('select pg_advisory_unlock_all()');
      holder.release();
    }
  });

  it("cannot keep a crashed run process's lease held, so crash recovery sees the process gone", async () => {
    const processId = randomUUID();
    const lease = await holdProcessLease(db.url, processId, silentLogger);
    const holder = await probe.pool.connect();
    let waiting: Promise<unknown> = Promise.resolve();
    const service = createPool(db.url, { max: 1 });
    const gone = async (): Promise<boolean> => {
      const { rows } = await service.query<{ gone: boolean }>('select asset_webhooks.process_gone($1) as gone', [
        processId,
      ]);
      return rows[0]!.gone;
    };
    try {
      // The lease is named after the process, in a connection name every role sees.
      const { rows } = await holder.query<{ application_name: string }>(
        "select application_name from pg_stat_activity where application_name like 'asset-webhooks lease %'",
      );
      expect(rows.map((row) => row.application_name)).toContain(`asset-webhooks lease ${processId}`);
      await expectDenied(holder, 'select from asset_webhooks.session_locks');
      // Queued behind the process's own lock, so granted the moment it is freed.
      waiting = holder
        .query("select pg_advisory_lock(hashtextextended('asset_webhooks.process:' || $1, 0))", [processId])
        .catch(() => {});
      expect(await gone()).toBe(false);
      // The process dies: its session ends, and it never takes its lease again.
      await db.pool.query('select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1', [
        `asset-webhooks lease ${processId}`,
      ]);
      await lease.release();
      await waiting;
      await eventually(async () => ((await gone()) ? true : undefined), {
        timeoutMs: 5000,
        what: "the dead process's lease to be free",
      });
    } finally {
      await lease.release();
      await service.end();
      await holder.query('select pg_advisory_unlock_all()');
      holder.release();
    }
  });
});

/** Runs sql as the probe and expects PostgreSQL to refuse it for want of rights (42501). */
async function expectDenied(client: pg.PoolClient, sql: string, inTransaction = false): Promise<void> {
  const run = async (): Promise<void> => {
    if (!inTransaction) {
      await client.query(sql);
      return;
    }
    await client.query('begin');
    try {
      await client.query(sql);
    } finally {
      await client.query('rollback');
    }
  };
  await expect(run()).rejects.toMatchObject({ code: '42501' });
}
