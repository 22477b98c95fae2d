import { beforeEach, expect, it } from 'vitest';
import { traceEvent } from '../../src/investigate/trace.js';
import { renderTrace } from '../../src/investigate/trace-render.js';
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

const db = useTestDatabase();

beforeEach(() => resetData(db.pool));

const all = openWebhook('all');
const mirror = openWebhook('copy', { mirror: true });

/** The event types each webhook got, in payload order, for one asset. */
async function received(assetId: number): Promise<Record<string, string[]>> {
  const sent: Record<string, string[]> = {};
  for (const payload of await payloads(db.pool))
    for (const event of bodyEvents(payload))
      if (event.assetId === assetId) (sent[payload.webhook_id] ??= []).push(event.eventType);
  return sent;
}

it('a change to an asset in the Trash is no EDITED or REVERSION for any webhook, the mirror one included, and is excluded as in_trash', async () => {
  await registerWebhooks(db.pool, [all, mirror]);
  await db.pool.query('insert into assets (asset_id, latest_atom_id) values (900, 1)');
  await runCoalesce(db.pool, [all, mirror]);
  await db.pool.query('update assets set trashed_at = now() where asset_id = 900');
  await runCoalesce(db.pool, [all, mirror]);
  await db.pool.query("update assets set title = 'new' where asset_id = 900");
  await db.pool.query("insert into asset_keywords values (900, 'k')");
  await db.pool.query('update assets set latest_atom_id = 2 where asset_id = 900');
  await runCoalesce(db.pool, [all, mirror]);

  expect(await received(900)).toEqual({ all: ['CREATED', 'DELETED'], copy: ['CREATED', 'DELETED'] });
  const trashed = (await outcomes(db.pool)).filter((o) => o.excluded_by === 'in_trash');
  // The title and keyword edits collapse into one; it and the REVERSION are excluded for both webhooks.
  expect(trashed.map((o) => [o.event_type, o.webhook_id, o.outcome]).sort()).toEqual([
    ['EDITED', 'all', 'excluded'],
    ['EDITED', 'copy', 'excluded'],
    ['REVERSION', 'all', 'excluded'],
    ['REVERSION', 'copy', 'excluded'],
  ]);
  const text = renderTrace(await traceEvent(db.pool, trashed.find((o) => o.event_type === 'REVERSION')!.event_id));
  expect(text).toContain('in_trash');
  expect(text).toContain('asset in the Trash');

  // The restore sends EDITED, as before.
  await db.pool.query('update assets set trashed_at = null where asset_id = 900');
  await runCoalesce(db.pool, [all, mirror]);
  expect(await received(900)).toEqual({
    all: ['CREATED', 'DELETED', 'EDITED'],
    copy: ['CREATED', 'DELETED', 'EDITED'],
  });
});

it('an asset trashed, edited and restored within one interval arrives active', async () => {
  await registerWebhooks(db.pool, [all, mirror]);
  await db.pool.query('insert into assets (asset_id) values (7)');
  await runCoalesce(db.pool, [all, mirror]);
  await db.pool.query('update assets set trashed_at = now() where asset_id = 7');
  await db.pool.query("update assets set title = 'in the Trash' where asset_id = 7");
  await db.pool.query('update assets set latest_atom_id = 5 where asset_id = 7');
  await db.pool.query('update assets set trashed_at = null where asset_id = 7');
  await runCoalesce(db.pool, [all, mirror]);
  const sent = await received(7);
  expect(sent.all).toEqual(['CREATED', 'DELETED', 'EDITED']);
  expect(sent.copy).toEqual(['CREATED', 'DELETED', 'EDITED']);
  expect(
    (await outcomes(db.pool))
      .filter((o) => o.webhook_id === 'all' && o.excluded_by === 'in_trash')
      .map((o) => o.event_type),
  ).toEqual(['REVERSION']);
});

it('an edit committed after the asset went to the Trash is excluded as in_trash, though made before', async () => {
  await registerWebhooks(db.pool, [all]);
  await db.pool.query('insert into assets (asset_id) values (8)');
  await runCoalesce(db.pool, [all]);
  const writer = await db.pool.connect();
  try {
    await writer.query('begin');
    await writer.query("insert into asset_keywords values (8, 'late')");
    await db.pool.query('update assets set trashed_at = now() where asset_id = 8');
    await runCoalesce(db.pool, [all]);
    await writer.query('commit');
  } finally {
    writer.release();
  }
  await runCoalesce(db.pool, [all]);
  expect((await received(8)).all).toEqual(['CREATED', 'DELETED']);
});

it('the reference binding marks changes in the Trash alike on its one-row and its set-based paths', async () => {
  await db.pool.query('insert into assets (asset_id, trashed_at) select g, now() from generate_series(1, 4) g');
  await db.pool.query('insert into assets (asset_id) values (5), (6)');
  await db.pool.query('truncate asset_webhooks.outbox');
  // One row, then several: an edit in the Trash, a restore with a new version, a move to the Trash with an edit.
  await db.pool.query("update assets set title = 'one' where asset_id = 1");
  await db.pool.query("update assets set title = 'many' where asset_id in (2, 3)");
  await db.pool.query('update assets set trashed_at = null, latest_atom_id = 9 where asset_id = 4');
  await db.pool.query("update assets set trashed_at = now(), title = 'gone' where asset_id in (5, 6)");
  const { rows } = await db.pool.query<{ event_type: string; asset_id: string; in_trash: boolean | null }>(
    'select event_type, asset_id::text, in_trash from asset_webhooks.outbox order by asset_id, seq',
  );
  expect(rows.map((row) => [row.asset_id, row.event_type, row.in_trash])).toEqual([
    ['1', 'EDITED', true],
    ['2', 'EDITED', true],
    ['3', 'EDITED', true],
    ['4', 'REVERSION', false],
    ['4', 'EDITED', false],
    ['5', 'EDITED', false],
    ['5', 'DELETED', null],
    ['6', 'EDITED', false],
    ['6', 'DELETED', null],
  ]);
});
