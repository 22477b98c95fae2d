import { setTimeout as sleep } from 'node:timers/promises';
import { beforeEach, expect, it } from 'vitest';
import { withCoalesceLock } from '../../src/coalesce/run.js';
import { openWebhook, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The coalescing lock is a row of asset_webhooks.session_locks, asked for
// again every 100 ms rather than queued for. A reconcile takes it for one
// chunk at a time, back to back, and must still let a waiting run in.

const db = useTestDatabase();

beforeEach(() => resetData(db.pool));

it("lets a waiting coalescing run in between a reconcile's chunks, which take the lock back to back", async () => {
  const webhook = openWebhook('crm');
  await registerWebhooks(db.pool, [webhook]);
  await db.pool.query('insert into assets (asset_id) values (1)');
  const session = await db.pool.connect();
  let reconciling = true;
  let chunks = 0;
  const reconcile = (async () => {
    while (reconciling) {
      await withCoalesceLock(session, async () => {
        chunks += 1;
        await sleep(50);
      });
    }
  })();
  try {
    await sleep(200);
    const result = await runCoalesce(db.pool, [webhook]);
    expect(result.runId).not.toBeNull();
    expect(result.events).toBe(1);
  } finally {
    reconciling = false;
    await reconcile;
    session.release();
  }
  expect(chunks).toBeGreaterThan(1);
});
