import { expect, it } from 'vitest';
import { releaseSessionLock, takeSessionLock } from '../../src/db/session-lock.js';
import { requeueOrphanedReconciles } from '../../src/mirror/auto-reconcile.js';
import { reconcileLockName } from '../../src/mirror/reconcile-store.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

async function queued(): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `select j.payload ->> 'webhookId' as id from graphile_worker._private_jobs j
     join graphile_worker._private_tasks t on t.id = j.task_id
     where t.identifier = 'reconcile' order by id`,
  );
  return rows.map((row) => row.id);
}

it("maintenance queues again a service's reconcile whose process is gone, and leaves one still running and an operator's", async () => {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.reconciles');
  await db.pool.query(
    `insert into asset_webhooks.reconciles (webhook_id, checks_digest, requested_by)
     values ('orphaned', 'x', 'run 1b4e28ba-2fa1-11d2-883f-0016d3cca427'),
            ('running', 'x', 'run 6fa459ea-ee8a-3ca4-894e-db77e160355e'),
            ('by-hand', 'x', 'operator@host')`,
  );
  // A live process runs the reconcile of `running`: it holds that webhook's lock.
  const holder = await db.pool.connect();
  try {
    expect(await takeSessionLock(holder, reconcileLockName('running'))).toBe(true);
    expect(await requeueOrphanedReconciles(db.pool)).toEqual(['orphaned']);
    expect(await queued()).toEqual(['orphaned']);
  } finally {
    await releaseSessionLock(holder, reconcileLockName('running'));
    holder.release();
  }
  // Its process gone too, it is queued as well; the orphaned one's waiting job is replaced, not doubled.
  expect((await requeueOrphanedReconciles(db.pool)).sort()).toEqual(['orphaned', 'running']);
  expect(await queued()).toEqual(['orphaned', 'running']);
});
