import { expect, it } from 'vitest';
import { seedFromHistory } from '../../src/mirror/seed.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

async function members(): Promise<Array<{ asset_id: number; sent_at: Record<string, string> }>> {
  const { rows } = await db.pool.query<{ asset_id: number; sent_at: Record<string, string> }>(
    "select asset_id::int, sent_at from asset_webhooks.mirror_members where 'copy' = any (webhooks) order by asset_id",
  );
  return rows;
}

it('seeds the assets whose last event to the webhook is no removal, with its eventTimestamp, and leaves members as they are', async () => {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
  const filters = [{ filterKind: 'keywords' as const, condition: 'ANY' as const, value: ['shop'] }];
  const mirror = openWebhook('copy', { mirror: true, filters });
  const plain = openWebhook('copy', { filters });
  await registerWebhooks(db.pool, [mirror]);
  // A mirror webhook first: 1 and 2 enter its set, then 2 leaves it with an UNMATCHED.
  await db.pool.query('insert into assets (asset_id) values (1), (2)');
  await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop'), (2, 'shop')");
  await runCoalesce(db.pool, [mirror]);
  await db.pool.query('delete from asset_keywords where asset_id = 2');
  await runCoalesce(db.pool, [mirror]);
  const before = await members();
  expect(before.map((member) => member.asset_id)).toEqual([1]);
  // Then plain: 3 is delivered, 4 delivered then purged, 2 edited (excluded: a plain webhook is not told).
  await db.pool.query('insert into assets (asset_id) values (3), (4)');
  await db.pool.query("insert into asset_keywords (asset_id, value) values (3, 'shop'), (4, 'shop')");
  await runCoalesce(db.pool, [plain]);
  await db.pool.query("update assets set title = 'x' where asset_id = 2");
  await db.pool.query('delete from assets where asset_id = 4');
  await runCoalesce(db.pool, [plain]);

  expect(await seedFromHistory(db.pool, 'copy')).toBe(1);
  const after = await members();
  expect(after.map((member) => member.asset_id)).toEqual([1, 3]);
  // 1 as the mirror routing left it; 3 with the eventTimestamp of its last event the webhook got.
  expect(after[0]).toEqual(before[0]);
  const sentFor3 = (await payloads(db.pool, 'copy'))
    .flatMap(bodyEvents)
    .filter((event) => event.assetId === 3)
    .at(-1)!.eventTimestamp;
  expect(after[1]!.sent_at).toEqual({ copy: sentFor3 });
  // Again: nothing more.
  expect(await seedFromHistory(db.pool, 'copy')).toBe(0);
});
