import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

it('0005 upgrades a live installation: a webhook paused before it stays paused by its document, and no 410 holds any', async () => {
  await resetData(db.pool);
  // The installation as migration 0004 left it: one webhook paused, one sending.
  await undoMigrationsAfter(db.pool, 5);
  await db.pool
    .query(`alter table asset_webhooks.webhooks drop column config_paused, drop column gone_since, drop column gone_payload_id;
    alter table asset_webhooks.attempts drop constraint attempts_outcome_check;
    alter table asset_webhooks.attempts add constraint attempts_outcome_check
      check (outcome in ('delivered', 'retry', 'rejected', 'retries_exhausted', 'expired'));
    delete from asset_webhooks.migrations where id >= 5`);
  await db.pool.query(`insert into asset_webhooks.webhooks (webhook_id, url, enabled, paused_since)
    values ('archive', 'http://archive.example/', true, now() - interval '1 hour'),
           ('crm', 'http://crm.example/', true, null)`);

  const result = await migrate(db.pool);
  expect(result.applied).toEqual(migrationsFrom(5));
  const { rows } = await db.pool.query<{ webhook_id: string; config_paused: boolean; gone_since: Date | null }>(
    'select webhook_id, config_paused, gone_since from asset_webhooks.webhooks order by webhook_id',
  );
  expect(rows).toEqual([
    { webhook_id: 'archive', config_paused: true, gone_since: null },
    { webhook_id: 'crm', config_paused: false, gone_since: null },
  ]);
  // A 410 can hold a webhook only while it is held: gone_since never stands without paused_since.
  await expect(
    db.pool.query("update asset_webhooks.webhooks set gone_since = now() where webhook_id = 'crm'"),
  ).rejects.toThrow(/webhooks_gone_held/);
  // The resume of the document's pause resumes a webhook no 410 holds, as before.
  const { rows: resumed } = await db.pool.query<{ w: string }>("select w from asset_webhooks.resume_webhooks('{}') w");
  expect(resumed).toEqual([{ w: 'archive' }]);
});
