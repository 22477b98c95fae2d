import { beforeEach, expect, it } from 'vitest';
import { eventually } from '../helpers/receiver.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

beforeEach(() => resetData(db.pool));

const plain = openWebhook('plain');
const copy = openWebhook('copy', { mirror: true });

/** Each webhook's events of one asset, in payload order, as [eventType, eventTimestamp]. */
async function sent(assetId: number): Promise<Record<string, Array<[string, string]>>> {
  const byWebhook: Record<string, Array<[string, string]>> = {};
  for (const payload of await payloads(db.pool))
    for (const event of bodyEvents(payload))
      if (event.assetId === assetId)
        (byWebhook[payload.webhook_id] ??= []).push([event.eventType, event.eventTimestamp]);
  return byWebhook;
}

/** Captures `types` for asset `assetId`, all at the same instant, as a binding does for one statement. */
async function captureAt(assetId: number, at: string, types: readonly string[]): Promise<void> {
  for (const type of types)
    await db.pool.query(
      `insert into asset_webhooks.outbox (occurred_at, event_type, asset_id, asset_uuid, atom_id, supertype)
       values ($1, $2, $3, (select asset_uuid from assets where asset_id = $3), 1, 'Resource')`,
      [at, type, assetId],
    );
}

it("gives one asset's events of the same millisecond strictly increasing eventTimestamps, the same for every webhook", async () => {
  await registerWebhooks(db.pool, [plain, copy]);
  await db.pool.query('insert into assets (asset_id) values (1)');
  await db.pool.query('truncate asset_webhooks.outbox');
  // A restore with a new version in one statement: REVERSION and EDITED of one instant.
  await captureAt(1, '2026-12-01T10:00:00.000Z', ['CREATED', 'REVERSION', 'EDITED']);
  await runCoalesce(db.pool, [plain, copy], { chunkSize: 2 });
  const expected: Array<[string, string]> = [
    ['CREATED', '2026-12-01T10:00:00.000Z'],
    ['REVERSION', '2026-12-01T10:00:00.001Z'],
    ['EDITED', '2026-12-01T10:00:00.002Z'],
  ];
  expect(await sent(1)).toEqual({ plain: expected, copy: expected });
  // The ledger shows each event at the time it was sent.
  const { rows } = await db.pool.query<{ at: string }>(
    `select to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at from asset_webhooks.events order by seq`,
  );
  expect(rows.map((row) => row.at)).toEqual(expected.map(([, at]) => at));
});

it('raises, for a plain webhook too, the time of a change that commits after a later change of its asset was sent', async () => {
  await registerWebhooks(db.pool, [plain, copy]);
  await db.pool.query('insert into assets (asset_id) values (2)');
  await runCoalesce(db.pool, [plain, copy]);
  const held = await db.pool.connect();
  try {
    await held.query('begin');
    await held.query("insert into asset_keywords values (2, 'held')");
    // The new version is made once the database's clock has left the edit's millisecond.
    const {
      rows: [edit],
    } = await held.query<{ at: string }>('select max(occurred_at)::text as at from asset_webhooks.outbox');
    await eventually(async () => {
      const { rows } = await db.pool.query<{ past: boolean }>(
        "select clock_timestamp() >= date_trunc('milliseconds', $1::timestamptz) + interval '1 ms' as past",
        [edit!.at],
      );
      return rows[0]!.past ? true : undefined;
    });
    await db.pool.query('update assets set latest_atom_id = 3 where asset_id = 2');
    await runCoalesce(db.pool, [plain, copy]);
    await held.query('commit');
  } finally {
    held.release();
  }
  await runCoalesce(db.pool, [plain, copy]);
  const events = await sent(2);
  expect(events.plain!.map(([type]) => type)).toEqual(['CREATED', 'REVERSION', 'EDITED']);
  const [, reversion, edited] = events.plain!;
  // The edit was made in a millisecond before the new version's; it goes out a millisecond after it.
  expect(Date.parse(edited![1]) - Date.parse(reversion![1])).toBe(1);
  expect(events.copy).toEqual(events.plain);
  // The ledger (event_outcomes.occurred_at, trace) shows the time it was sent with.
  const { rows } = await db.pool.query<{ sent: string }>(
    `select distinct to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as sent
     from asset_webhooks.event_outcomes where event_type = 'EDITED'`,
  );
  expect(rows.map((row) => row.sent)).toEqual([edited![1]]);
});

it('keeps rising across runs, and across chunks of one run whose writes are not committed yet', async () => {
  await registerWebhooks(db.pool, [plain]);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 3) g');
  await db.pool.query('truncate asset_webhooks.outbox');
  for (const id of [1, 2, 3]) await captureAt(id, '2026-12-01T10:00:00.000Z', ['CREATED']);
  await runCoalesce(db.pool, [plain]);
  // Older than what was sent: each of the three assets, one event per chunk of one row.
  for (const id of [1, 2, 3, 1, 2, 3]) await captureAt(id, '2026-12-01T09:59:59.000Z', ['EDITED']);
  for (const id of [1, 2, 3]) await captureAt(id, '2026-12-01T09:59:59.000Z', ['REVERSION']);
  await runCoalesce(db.pool, [plain], { chunkSize: 1 });
  for (const id of [1, 2, 3])
    expect((await sent(id)).plain).toEqual([
      ['CREATED', '2026-12-01T10:00:00.000Z'],
      ['EDITED', '2026-12-01T10:00:00.001Z'],
      ['REVERSION', '2026-12-01T10:00:00.002Z'],
    ]);
});
