import { expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import {
  bodyEvents,
  openWebhook,
  outcomes,
  payloads,
  registerWebhooks,
  resetData,
  runCoalesce,
} from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

it('0002 upgrades a live installation: what was captured and coalesced before it keeps its meaning, and a waiting change in the Trash is excluded', async () => {
  const all = openWebhook('all');
  await resetData(db.pool);
  await registerWebhooks(db.pool, [all]);
  await db.pool.query('insert into assets (asset_id) values (1), (2)');
  await db.pool.query('update assets set trashed_at = now() where asset_id = 2');
  await runCoalesce(db.pool, [all]);

  // The installation as release 0.1.0 left it (schema version 1), with two
  // edits captured by its binding, which knew no in_trash, waiting.
  await undoMigrationsAfter(db.pool, 2);
  await db.pool.query(`alter table asset_webhooks.outbox drop column in_trash;
    alter table asset_webhooks.events drop column in_trash cascade;
    alter table asset_webhooks.backfills drop column excluded_by;
    alter table asset_webhooks.webhooks drop column config_paused, drop column gone_since, drop column gone_payload_id;
    alter table asset_webhooks.attempts drop constraint attempts_outcome_check;
    alter table asset_webhooks.attempts add constraint attempts_outcome_check
      check (outcome in ('delivered', 'retry', 'rejected', 'retries_exhausted', 'expired'));
    alter table asset_webhooks.mirror_members drop column sent_at;
    delete from asset_webhooks.migrations where id >= 2`);
  await db.pool.query(`insert into asset_webhooks.outbox (event_type, asset_id, asset_uuid, atom_id, supertype)
    select 'EDITED', asset_id, asset_uuid, latest_atom_id, supertype from assets order by asset_id`);

  const result = await migrate(db.pool);
  expect(result.applied).toEqual(migrationsFrom(2));
  const { rows: waiting } = await db.pool.query<{ in_trash: boolean | null }>(
    'select in_trash from asset_webhooks.outbox order by seq',
  );
  expect(waiting).toEqual([{ in_trash: null }, { in_trash: null }]);
  const { rows: coalesced } = await db.pool.query<{ event_type: string; in_trash: boolean }>(
    'select event_type, in_trash from asset_webhooks.events order by seq',
  );
  expect(coalesced).toEqual([
    { event_type: 'CREATED', in_trash: false },
    { event_type: 'CREATED', in_trash: false },
    { event_type: 'DELETED', in_trash: false },
  ]);

  // The binding did not say; the view does: asset 2 is in the Trash.
  await runCoalesce(db.pool, [all]);
  const edits = (await outcomes(db.pool)).filter((o) => o.event_type === 'EDITED');
  expect(edits.map((o) => [o.asset_id, o.outcome, o.excluded_by])).toEqual([
    [1, 'pending', null],
    [2, 'excluded', 'in_trash'],
  ]);
  const sent = (await payloads(db.pool)).flatMap(bodyEvents).map((e) => [e.assetId, e.eventType]);
  expect(sent).toEqual([
    [1, 'CREATED'],
    [2, 'CREATED'],
    [2, 'DELETED'],
    [1, 'EDITED'],
  ]);
});
