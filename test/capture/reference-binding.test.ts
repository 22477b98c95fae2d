import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { migrate } from '../../src/migrate/migrate.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

interface Captured {
  event_type: string;
  asset_id: number;
  atom_id: number | null;
}

async function captured(): Promise<Captured[]> {
  const { rows } = await db.pool.query<Captured>(
    'select event_type, asset_id, atom_id from asset_webhooks.outbox order by seq',
  );
  return rows;
}

/** Runs setup statements, forgets what they captured, runs the change, returns what it captured. */
async function capture(setup: string, change: string): Promise<Array<[string, number, number | null]>> {
  if (setup) await db.pool.query(setup);
  await db.pool.query('delete from asset_webhooks.outbox');
  await db.pool.query(change);
  return (await captured()).map((row) => [row.event_type, row.asset_id, row.atom_id]);
}

beforeEach(async () => {
  await db.pool.query(
    'truncate public.assets, public.asset_atoms, public.asset_keywords, public.asset_additional_fields, asset_webhooks.outbox, asset_webhooks.capture_errors restart identity cascade',
  );
});

const ONE = "insert into assets (asset_id, title, latest_atom_id) values (1, 'one', 11)";
const TWO = "insert into assets (asset_id, title) values (1, 'one'), (2, 'two')";

// Which change is which event (docs/spec-decisions.md, capture), row by row.
describe('the reference binding captures each kind of change as exactly the events listed for it', () => {
  it.each([
    ['insert into assets: CREATED with the atom at that moment', '', ONE, [['CREATED', 1, 11]]],
    [
      'a multi-row insert: one CREATED per row',
      '',
      'insert into assets (asset_id) values (1), (2), (3)',
      [
        ['CREATED', 1, null],
        ['CREATED', 2, null],
        ['CREATED', 3, null],
      ],
    ],
    ['trashed_at from null to a value: DELETED', ONE, 'update assets set trashed_at = now()', [['DELETED', 1, 11]]],
    [
      'trashed_at from a value to null (restore): EDITED',
      `${ONE}; update assets set trashed_at = now()`,
      'update assets set trashed_at = null',
      [['EDITED', 1, 11]],
    ],
    [
      'latest_atom_id changed: REVERSION with the new atom',
      ONE,
      'update assets set latest_atom_id = 12',
      [['REVERSION', 1, 12]],
    ],
    ['another column changed: EDITED', ONE, "update assets set state = 'approved'", [['EDITED', 1, 11]]],
    [
      'a REVERSION combined with another column change: REVERSION and EDITED',
      ONE,
      "update assets set latest_atom_id = 12, title = 'new'",
      [
        ['REVERSION', 1, 12],
        ['EDITED', 1, 12],
      ],
    ],
    ['an update that changes nothing: none', ONE, 'update assets set title = title, state = state', []],
    [
      'a statement touching several assets: one event per changed row',
      TWO,
      "update assets set state = 'x'",
      [
        ['EDITED', 1, null],
        ['EDITED', 2, null],
      ],
    ],
    [
      'a statement where only some rows change: only those',
      `${TWO}; update assets set state = 'x' where asset_id = 1`,
      "update assets set state = 'x'",
      [['EDITED', 2, null]],
    ],
    [
      'insert into asset_keywords: EDITED for that asset',
      ONE,
      "insert into asset_keywords values (1, 'summer'), (1, 'winter')",
      [['EDITED', 1, 11]],
    ],
    [
      'update in asset_keywords: EDITED',
      `${ONE}; insert into asset_keywords values (1, 'summer')`,
      "update asset_keywords set value = 'autumn'",
      [['EDITED', 1, 11]],
    ],
    [
      'an update of keywords that changes nothing: none',
      `${ONE}; insert into asset_keywords values (1, 'summer')`,
      'update asset_keywords set value = value',
      [],
    ],
    [
      'delete from asset_keywords: EDITED',
      `${ONE}; insert into asset_keywords values (1, 'summer')`,
      'delete from asset_keywords',
      [['EDITED', 1, 11]],
    ],
    [
      'insert into asset_additional_fields: EDITED',
      ONE,
      "insert into asset_additional_fields values (1, 'campaign', '2026')",
      [['EDITED', 1, 11]],
    ],
    [
      'update in asset_additional_fields: EDITED',
      `${ONE}; insert into asset_additional_fields values (1, 'campaign', '2026')`,
      "update asset_additional_fields set value = '2027'",
      [['EDITED', 1, 11]],
    ],
    [
      'delete from asset_additional_fields: EDITED',
      `${ONE}; insert into asset_additional_fields values (1, 'campaign', '2026')`,
      'delete from asset_additional_fields',
      [['EDITED', 1, 11]],
    ],
    [
      'delete from assets: PURGED with atomId null, and no stray EDITED from the cascade',
      `${ONE}; insert into asset_keywords values (1, 'k'); insert into asset_additional_fields values (1, 'f', 'v'); insert into asset_atoms (asset_id) values (1)`,
      'delete from assets',
      [['PURGED', 1, null]],
    ],
    ['insert into asset_atoms alone: none', ONE, 'insert into asset_atoms (asset_id) values (1)', []],
    [
      'truncate asset_keywords: EDITED for each asset that had keywords',
      `${TWO}; insert into asset_keywords values (2, 'a'), (2, 'b')`,
      'truncate asset_keywords',
      [['EDITED', 2, null]],
    ],
    [
      'truncate asset_additional_fields: EDITED for each asset that had fields',
      `${TWO}; insert into asset_additional_fields values (1, 'f', 'v')`,
      'truncate asset_additional_fields',
      [['EDITED', 1, null]],
    ],
    ['truncate of an empty detail table: none', TWO, 'truncate asset_keywords, asset_additional_fields', []],
    [
      'truncate assets cascade: PURGED for each asset, and EDITED for each that had keywords',
      `${TWO}; insert into asset_keywords values (1, 'k'); insert into asset_atoms (asset_id) values (1)`,
      'truncate assets cascade',
      [
        ['PURGED', 1, null],
        ['PURGED', 2, null],
        ['EDITED', 1, null],
      ],
    ],
  ] as const)('%s', async (_name, setup, change, expected) => {
    expect(await capture(setup, change)).toEqual(expected);
  });

  it("keeps each asset's events of one statement in the order REVERSION, EDITED, DELETED, whatever the other assets", async () => {
    await db.pool.query(
      "insert into assets (asset_id, title, latest_atom_id) select g, 't' || g, g from generate_series(1, 300) g",
    );
    await db.pool.query('delete from asset_webhooks.outbox');
    // Every third asset gets all three, the others one or two of them.
    await db.pool.query(`update assets set
       latest_atom_id = case when asset_id % 2 = 0 then latest_atom_id + 1000 else latest_atom_id end,
       title = case when asset_id % 3 = 0 then 'changed' else title end,
       trashed_at = case when asset_id % 2 = 0 or asset_id % 3 = 0 then now() end`);
    const byAsset = new Map<number, string[]>();
    for (const row of await captured())
      byAsset.set(row.asset_id, [...(byAsset.get(row.asset_id) ?? []), row.event_type]);
    const expected = (id: number): string[] => [
      ...(id % 2 === 0 ? ['REVERSION'] : []),
      ...(id % 3 === 0 ? ['EDITED'] : []),
      ...(id % 2 === 0 || id % 3 === 0 ? ['DELETED'] : []),
    ];
    for (let id = 1; id <= 300; id += 1)
      expect({ id, events: byAsset.get(id) ?? [] }).toEqual({ id, events: expected(id) });
  });

  it('captures nothing from a rolled-back transaction', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('begin');
      await client.query(ONE);
      await client.query("update assets set state = 'x'");
      await client.query('rollback');
    } finally {
      client.release();
    }
    expect(await captured()).toEqual([]);
  });

  it('captures the changes of a session with session_replication_role = replica, which bulk loads set to skip foreign-key checks', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('begin');
      await client.query('set local session_replication_role = replica');
      await client.query(ONE);
      await client.query("insert into asset_keywords values (1, 'k')");
      await client.query("update assets set state = 'x'");
      await client.query('truncate asset_keywords');
      await client.query('delete from assets');
      await client.query('commit');
    } finally {
      client.release();
    }
    expect((await captured()).map((row) => row.event_type)).toEqual([
      'CREATED',
      'EDITED',
      'EDITED',
      'EDITED',
      'PURGED',
    ]);
  });

  it('keeps every capture trigger firing in replica sessions after the binding is applied again', async () => {
    // CREATE OR REPLACE TRIGGER sets a trigger back to firing on origin only.
    await migrate(db.pool, { binding: 'reference' });
    const { rows } = await db.pool.query<{ tgname: string; tgenabled: string }>(
      `select tgname, tgenabled from pg_trigger where tgname like 'asset\\_webhooks\\_capture\\_%' order by tgrelid::regclass::text, tgname`,
    );
    expect(rows).toHaveLength(12);
    expect(new Set(rows.map((row) => row.tgenabled))).toEqual(new Set(['A']));
  });

  it('records what the coalescer needs of a purged asset: uuid, supertype and parent', async () => {
    await db.pool.query(
      "insert into assets (asset_id, supertype) values (1, 'Project'); insert into assets (asset_id, parent_id) values (2, 1)",
    );
    const {
      rows: [asset],
    } = await db.pool.query<{ asset_uuid: string }>('select asset_uuid from assets where asset_id = 2');
    await db.pool.query('delete from asset_webhooks.outbox; delete from assets where asset_id = 2');
    const { rows } = await db.pool.query(
      'select event_type, asset_uuid, supertype, parent_id, atom_id from asset_webhooks.outbox',
    );
    expect(rows).toEqual([
      { event_type: 'PURGED', asset_uuid: asset!.asset_uuid, supertype: 'Resource', parent_id: 1, atom_id: null },
    ]);
  });

  it('gives every event a distinct UUIDv7 eventId, derived from its row, and a time of occurrence at capture', async () => {
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 50) g');
    const { rows } = await db.pool.query<{ n: number; ids: number; late: number; v7: number; stored: number }>(`
      select count(*)::int n, count(distinct event_id)::int ids, count(*) filter (where occurred_at > now() + interval '1 minute')::int late,
             count(*) filter (where event_id::text ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')::int v7,
             (select count(event_id)::int from asset_webhooks.outbox) stored
      from asset_webhooks.waiting_events`);
    // Nothing computed in the trigger: the id is derived when the row is read.
    expect(rows[0]).toEqual({ n: 50, ids: 50, late: 0, v7: 50, stored: 0 });
    // Its first 48 bits are the time of occurrence in milliseconds; each id leads back to its row.
    const { rows: back } = await db.pool.query<{ wrong_time: number; found: number }>(`
      select count(*) filter (where ('x' || lpad(replace(left(w.event_id::text, 13), '-', ''), 16, '0'))::bit(64)::bigint
                                    <> floor(extract(epoch from w.occurred_at) * 1000)::bigint)::int wrong_time,
             count(*) filter (where (select f.seq from asset_webhooks.find_waiting_event(w.event_id) f) = w.seq)::int found
      from asset_webhooks.waiting_events w`);
    expect(back[0]).toEqual({ wrong_time: 0, found: 50 });
  });

  it('keeps an eventId a binding stored itself, and finds the event by it', async () => {
    await db.pool.query(
      "insert into asset_webhooks.outbox (event_id, event_type, asset_id) values ('0b5f2c1e-8d5a-4c1e-9a3b-5d2f1e0c9b7a', 'EDITED', 7)",
    );
    const { rows } = await db.pool.query(
      "select event_type, asset_id from asset_webhooks.find_waiting_event('0b5f2c1e-8d5a-4c1e-9a3b-5d2f1e0c9b7a')",
    );
    expect(rows).toEqual([{ event_type: 'EDITED', asset_id: 7 }]);
    const { rows: none } = await db.pool.query(
      "select * from asset_webhooks.find_waiting_event('0b5f2c1e-8d5a-4c1e-9a3b-5d2f1e0c9b7b')",
    );
    expect(none).toEqual([]);
  });

  it('lets the application role write assets without any right on asset_webhooks', async () => {
    await db.pool.query(`
      do $$ begin
        if not exists (select from pg_roles where rolname = 'aw_test_app') then create role aw_test_app; end if;
      end $$;
      grant usage on schema public to aw_test_app;
      grant all on all tables in schema public to aw_test_app;
      grant all on all sequences in schema public to aw_test_app;`);
    const client = await db.pool.connect();
    try {
      await client.query('set role aw_test_app');
      await client.query('set search_path = pg_temp, public');
      await client.query(ONE);
      await client.query("update assets set state = 'x'");
      await expect(client.query('select * from asset_webhooks.outbox')).rejects.toThrow(/permission denied/);
    } finally {
      await client.query('reset role');
      client.release();
    }
    expect((await captured()).map((row) => row.event_type)).toEqual(['CREATED', 'EDITED']);
  });

  it('fails a SERIALIZABLE write whose capture meets a serialization failure, as the write alone would, rather than commit it uncaptured', async () => {
    await db.pool.query(
      "insert into assets (asset_id) values (1), (2), (3); insert into asset_keywords (asset_id, value) values (3, 'kw')",
    );
    await db.pool.query('delete from asset_webhooks.outbox');
    const a = await db.pool.connect();
    const b = await db.pool.connect();
    try {
      await a.query('begin isolation level serializable');
      await a.query('select title from assets where asset_id = 2');
      await b.query('begin isolation level serializable');
      await b.query('select title from assets where asset_id = 1');
      await a.query("update assets set title = 'A1' where asset_id = 1");
      await b.query("update assets set title = 'B1' where asset_id = 3");
      await b.query('commit');
      // The capture of this delete reads asset 3, which b changed: a now has
      // conflicts both ways, and PostgreSQL refuses it.
      const failure = await a.query('delete from asset_keywords where asset_id = 3').then(
        () => null,
        (error: { code?: string }) => error,
      );
      expect(failure?.code).toBe('40001');
      await a.query('rollback');
    } finally {
      a.release();
      b.release();
    }
    const { rows: keywords } = await db.pool.query('select value from asset_keywords where asset_id = 3');
    expect(keywords).toEqual([{ value: 'kw' }]);
    expect(await captured()).toEqual([{ event_type: 'EDITED', asset_id: 3, atom_id: null }]);
    const { rows: errors } = await db.pool.query('select sqlstate from asset_webhooks.capture_errors');
    expect(errors).toEqual([]);
  });

  it('refuses an event type outside the five the service knows, as a check violation', async () => {
    const failure = await db.pool
      .query("insert into asset_webhooks.outbox (event_type, asset_id) values ('EDIT', 1)")
      .then(
        () => null,
        (error: { code?: string; message?: string }) => error,
      );
    expect(failure?.code).toBe('23514');
    expect(failure?.message).toContain('asset_webhooks.event_type');
    expect(await captured()).toEqual([]);
  });

  it('never fails the source write when capture fails, and records why', async () => {
    // Simulate unexpected data: the outbox refuses rows of asset 666.
    await db.pool.query('alter table asset_webhooks.outbox add constraint reject_666 check (asset_id <> 666)');
    try {
      await db.pool.query('insert into assets (asset_id) values (666)');
      const { rows } = await db.pool.query<{ table_name: string; operation: string; sqlstate: string }>(
        'select table_name, operation, sqlstate from asset_webhooks.capture_errors',
      );
      expect(rows).toEqual([{ table_name: 'assets', operation: 'INSERT', sqlstate: '23514' }]);
      const { rows: assets } = await db.pool.query('select asset_id from assets');
      expect(assets).toEqual([{ asset_id: 666 }]);
      // A TRUNCATE whose capture fails empties the table all the same, and says so.
      await db.pool.query('truncate assets cascade');
      const { rows: truncated } = await db.pool.query<{ table_name: string; operation: string; sqlstate: string }>(
        "select table_name, operation, sqlstate from asset_webhooks.capture_errors where operation = 'TRUNCATE'",
      );
      expect(truncated).toEqual([{ table_name: 'assets', operation: 'TRUNCATE', sqlstate: '23514' }]);
      expect((await db.pool.query('select asset_id from assets')).rows).toEqual([]);
    } finally {
      await db.pool.query('alter table asset_webhooks.outbox drop constraint reject_666');
    }
  });
});

describe("the plans a session keeps for the binding's triggers", () => {
  // PL/pgSQL plans each statement of a trigger function at its first call in a
  // session and keeps that plan, with the transition tables' sizes of that
  // call as its estimates. A session's first update of one asset must not
  // leave a later bulk update with a plan that reads one transition table once
  // per row of the other: its cost grows with the square of the rows, and a
  // large update would hold its locks for minutes.
  it('captures nothing, and records no error, for an update of the primary key, whose old and new rows cannot be paired', async () => {
    // The full join keeps the unpaired rows; the branches must drop them rather than insert events of half a pair.
    expect(await capture(ONE, 'update assets set asset_id = 2')).toEqual([]);
    const { rows } = await db.pool.query('select sqlstate from asset_webhooks.capture_errors');
    expect(rows).toEqual([]);
  });

  it('pairs the old and new rows of a bulk update without a nested loop after a single-row update', async () => {
    await db.pool.query("insert into assets (asset_id, title) select g, 't' || g from generate_series(1, 3000) g");
    // A session of its own: the pool's sessions may have planned the trigger already.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query("update assets set title = 'first' where asset_id = 1");
      await client.query('delete from asset_webhooks.outbox');
      // auto_explain sends the plans of the trigger's statements to this client, with their row counts.
      await client.query("load 'auto_explain'");
      await client.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on;
        set auto_explain.log_analyze = on; set auto_explain.log_timing = off; set auto_explain.log_level = notice; set client_min_messages = notice`);
      const plans: string[] = [];
      client.on('notice', (notice) => plans.push(notice.message ?? ''));
      await client.query("update assets set state = 'bulk'");
      const capturePlan = plans.find((plan) => plan.includes('insert into asset_webhooks.outbox'));
      expect(capturePlan).toBeDefined();
      // PostgreSQL 18 prints rows with two decimals.
      const scans = [
        ...(capturePlan ?? '').matchAll(/Named Tuplestore Scan.*\(actual rows=([\d.]+) loops=(\d+)\)/g),
      ].map((match) => ({ rows: Number(match[1]), loops: Number(match[2]) }));
      expect(scans).toEqual([
        { rows: 3000, loops: 1 },
        { rows: 3000, loops: 1 },
      ]);
    } finally {
      await client.end();
    }
    const { rows } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from asset_webhooks.outbox where event_type = 'EDITED'",
    );
    expect(rows[0]?.n).toBe(3000);
  });

  // What a small update pays for capture is mostly setting up the capture
  // statements' plans and expressions: a one-row update takes a path without a hash join or a set operation, a
  // larger one a plan without a subquery node per branch, and neither reads
  // a table CHECK back from its text (the outbox's event_type is checked by
  // the domain asset_webhooks.event_type).
  it("inserts a one-row update's events by VALUES, a larger one's without a subquery node per branch, into an outbox without a table CHECK", async () => {
    await db.pool.query(TWO);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const plans: string[] = [];
    try {
      await client.query("load 'auto_explain'");
      await client.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on;
        set auto_explain.log_level = notice; set client_min_messages = notice`);
      client.on('notice', (notice) => plans.push(notice.message ?? ''));
      await client.query("update assets set title = 'edited' where asset_id = 1");
      const oneRow = plans.filter((plan) => plan.includes('insert into asset_webhooks.outbox'));
      expect(oneRow).toHaveLength(1);
      expect(oneRow[0]).not.toMatch(/Join|CTE|Append|Subquery Scan/);
      plans.length = 0;
      await client.query("update assets set title = 'both' where asset_id in (1, 2)");
      const twoRows = plans.find((plan) => plan.includes('insert into asset_webhooks.outbox')) ?? '';
      // One, over the whole union: PostgreSQL puts an INSERT's set operation under one.
      expect([...twoRows.matchAll(/Subquery Scan/g)]).toHaveLength(1);
      expect([...twoRows.matchAll(/CTE Scan on changed/g)]).toHaveLength(3);
    } finally {
      await client.end();
    }
    const { rows: checks } = await db.pool.query(
      "select conname from pg_constraint where conrelid = 'asset_webhooks.outbox'::regclass and contype = 'c'",
    );
    expect(checks).toEqual([]);
    expect((await captured()).filter((row) => row.event_type === 'EDITED').map((row) => row.asset_id)).toEqual([
      1, 1, 2,
    ]);
  });

  // The two paths compare old and new rows with the same conditions, written
  // twice: the same change must capture the same events on either.
  it.each([
    ['a title', "title = 'changed'"],
    ['the atom', 'latest_atom_id = 12'],
    ['the atom and the title', "latest_atom_id = 12, title = 'changed'"],
    ['to the Trash', 'trashed_at = now()'],
    ['to the Trash with a title', "trashed_at = now(), title = 'changed'"],
    ['to the Trash with the atom', 'trashed_at = now(), latest_atom_id = 12'],
    ['a restore', 'trashed_at = null'],
    ['a restore with the atom', 'trashed_at = null, latest_atom_id = 12'],
    ['a restore with a title', "trashed_at = null, title = 'changed'"],
    ['a restore with the atom and a title', "trashed_at = null, latest_atom_id = 12, title = 'changed'"],
    ['to the Trash with the atom and a title', "trashed_at = now(), latest_atom_id = 12, title = 'changed'"],
    ['the atom set to null', 'latest_atom_id = null'],
    ['a column set to null', 'state = null'],
    ['a column from null', 'schema_id = 7'],
    ['the uuid', 'asset_uuid = gen_random_uuid()'],
    ['the supertype', "supertype = 'Folder'"],
    ['the parent', 'parent_id = 2'],
    ['the type and the domain', 'type_id = 3, domain_id = 4'],
    ['a title to an equal value', "title = 'o' || 'ne'"],
    ['nothing', 'title = title'],
    ['the primary key', 'asset_id = asset_id + 100'],
  ])('captures the same events for a change of %s in a one-row update and in a larger one', async (_name, set) => {
    const trashed = set.includes('trashed_at = null') ? 'now()' : 'null';
    const assets = `insert into assets (asset_id, title, state, latest_atom_id, trashed_at)
      values (1, 'one', 'draft', 11, ${trashed}), (2, 'one', 'draft', 11, ${trashed})`;
    const alone = await capture(assets, `update assets set ${set} where asset_id = 1`);
    await db.pool.query('truncate public.assets, asset_webhooks.outbox cascade');
    const together = await capture(assets, `update assets set ${set} where asset_id in (1, 2)`);
    expect(together.filter(([, assetId]) => assetId === 1 || assetId === 101)).toEqual(alone);
    expect(
      together.filter(([, assetId]) => assetId === 2 || assetId === 102).map(([type, , atom]) => [type, atom]),
    ).toEqual(alone.map(([type, , atom]) => [type, atom]));
    // The larger update reaches its statement through a caught too_many_rows: nothing is recorded as a capture error.
    const { rows: errors } = await db.pool.query('select sqlstate, message from asset_webhooks.capture_errors');
    expect(errors).toEqual([]);
  });

  it('captures nothing, and records no error, for an update that matches no row', async () => {
    expect(await capture(ONE, "update assets set title = 'x' where asset_id = 99")).toEqual([]);
    const { rows } = await db.pool.query('select sqlstate from asset_webhooks.capture_errors');
    expect(rows).toEqual([]);
  });
});
