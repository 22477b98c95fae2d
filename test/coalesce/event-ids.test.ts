import fc from 'fast-check';
import { beforeEach, expect, it } from 'vitest';
import { EventIds, millisOf } from '../../src/coalesce/event-ids.js';
import { useTestDatabase } from '../helpers/test-database.js';
import {
  bodyEvents,
  openWebhook,
  outcomes,
  payloads,
  registerWebhooks,
  resetData,
  runCoalesce,
} from '../helpers/seed.js';

// The coalescer derives eventIds in Node; asset_webhooks.event_id_of derives
// them in SQL for everything else (waiting_events, the runbooks, find-event).
// The two must agree for every seq and capture time, or an id a receiver got
// could not be found by the operator who looks it up.

const db = useTestDatabase();

beforeEach(() => resetData(db.pool));

it('derives the same eventId as asset_webhooks.event_id_of for any seq and capture time', async () => {
  const ids = await EventIds.load(db.pool);
  const seq = fc.oneof(
    fc.integer({ min: 1, max: 2 ** 32 + 10 }),
    fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 53 - 1),
    fc.maxSafeNat(),
  );
  // Microseconds since the epoch, 1900 to 9999 (the database keeps them, the id floors them to
  // milliseconds); before 1970 the SQL's hex digits are those of a negative number.
  const micros = fc.oneof(
    fc.integer({ min: -2_208_988_800_000_000, max: 7_258_118_400_000_000 }),
    fc.constantFrom(-1, -999, -1000, -1001, 0, 253_402_300_000_000_000),
  );
  await fc.assert(
    fc.asyncProperty(fc.array(fc.tuple(seq, micros), { minLength: 50, maxLength: 50 }), async (cases) => {
      const { rows } = await db.pool.query<{ id: string; stamp: string }>(
        `select asset_webhooks.event_id_of(s, to_timestamp(0) + make_interval(secs => u / 1e6))::text as id,
              to_char((to_timestamp(0) + make_interval(secs => u / 1e6)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as stamp
       from unnest($1::bigint[], $2::bigint[]) with ordinality as c(s, u, i) order by i`,
        [cases.map(([s]) => s), cases.map(([, u]) => u)],
      );
      cases.forEach(([s], index) => {
        // The claim reads the time as this formatted timestamp: the milliseconds come from it.
        expect(ids.of(s, millisOf(rows[index]!.stamp))).toBe(rows[index]!.id);
      });
    }),
    { numRuns: 40 },
  );
});

it('refuses to derive ids when event_id_of was changed outside the migrations', async () => {
  const {
    rows: [definition],
  } = await db.pool.query<{ sql: string }>(
    "select pg_get_functiondef('asset_webhooks.event_id_of(bigint, timestamptz)'::regprocedure) as sql",
  );
  try {
    await db.pool
      .query(`create or replace function asset_webhooks.event_id_of(p_seq bigint, p_occurred_at timestamptz) returns uuid
      language sql immutable as $$ select gen_random_uuid() $$`);
    await expect(EventIds.load(db.pool)).rejects.toThrow(/differ from asset_webhooks\.event_id_of/);
  } finally {
    await db.pool.query(definition!.sql);
  }
  await expect(EventIds.load(db.pool)).resolves.toBeInstanceOf(EventIds);
});

it('keeps an id a binding stored itself, and collapses edits into a stored latest id', async () => {
  const crm = openWebhook('crm');
  await registerWebhooks(db.pool, [crm]);
  await db.pool.query('insert into assets (asset_id, latest_atom_id) values (1, 10), (2, 20)');
  await db.pool.query('delete from asset_webhooks.outbox');
  // Asset 1: a derived edit, then a stored one (the latest). Asset 2: a stored edit, then a derived one (the latest).
  await db.pool.query(
    `insert into asset_webhooks.outbox (event_type, asset_id, supertype, event_id) values
       ('EDITED', 1, 'Resource', null),
       ('EDITED', 1, 'Resource', '01900000-0000-7000-8000-00000000000a'),
       ('EDITED', 2, 'Resource', '01900000-0000-7000-8000-00000000000b'),
       ('EDITED', 2, 'Resource', null)`,
  );
  const { rows: waiting } = await db.pool.query<{ event_id: string; asset_id: number }>(
    'select event_id, asset_id from asset_webhooks.waiting_events order by seq',
  );

  await runCoalesce(db.pool, [crm]);

  const [payload] = await payloads(db.pool);
  expect(bodyEvents(payload!).map((e) => [e.assetId, e.eventId])).toEqual([
    [1, '01900000-0000-7000-8000-00000000000a'],
    [2, waiting[3]!.event_id],
  ]);
  const collapsed = (await outcomes(db.pool))
    .filter((o) => o.outcome === 'collapsed')
    .map((o) => o.event_id)
    .sort();
  expect(collapsed).toEqual([waiting[0]!.event_id, '01900000-0000-7000-8000-00000000000b'].sort());
});
