import { setTimeout as sleep } from 'node:timers/promises';
import { beforeEach, expect, it } from 'vitest';
import { withCoalesceLock } from '../../src/coalesce/coalesce-lock.js';
import { coalesce } from '../../src/coalesce/run.js';
import { eventually } from '../helpers/receiver.js';
import { openWebhook, registerWebhooks, resetData, silentLogger } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The coalescing lock is a row of asset_webhooks.session_locks, asked for
// again every 100 ms rather than queued for. A reconcile takes it for one
// chunk at a time, back to back, and must still let a waiting run in at the
// end of the chunk under way, as the advisory lock's queue did.

const db = useTestDatabase();

beforeEach(() => resetData(db.pool));

it("lets a waiting coalescing run in at the end of a reconcile's chunk, though the next chunk takes the lock back at once", async () => {
  const webhook = openWebhook('crm');
  await registerWebhooks(db.pool, [webhook]);
  await db.pool.query('insert into assets (asset_id) values (1)');
  const session = await db.pool.connect();
  const CHUNK_MS = 300;
  let reconciling = true;
  let chunks = 0;
  const reconcile = (async () => {
    while (reconciling) {
      await withCoalesceLock(session, async () => {
        chunks += 1;
        // A chunk's work, which takes time: the fixed wait is what the test is about.
        await sleep(CHUNK_MS);
      });
    }
  })();
  try {
    await eventually(async () => (chunks > 0 ? true : undefined), { what: 'the reconcile to hold the lock' });
    const asked = performance.now();
    let lockedAfterMs = Infinity;
    const result = await coalesce({
      pool: db.pool,
      webhooks: [webhook],
      maxPayloadBytes: 1024 * 1024,
      logger: silentLogger,
      beforeRun: async () => {
        lockedAfterMs = performance.now() - asked;
      },
    });
    expect(result.runId).not.toBeNull();
    expect(result.events).toBe(1);
    // The chunk under way ends within CHUNK_MS; the run asks again within 100 ms of that.
    expect(lockedAfterMs).toBeLessThan(CHUNK_MS * 2);
  } finally {
    reconciling = false;
    await reconcile;
    session.release();
  }
  expect(chunks).toBeGreaterThan(1);
});
