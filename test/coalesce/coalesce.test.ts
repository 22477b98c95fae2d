import { claimPayloads } from '../../src/delivery/attempt-store.js';
import { execFile } from 'node:child_process';
import pg from 'pg';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeEach, describe, expect, it } from 'vitest';
import { claimChunk, type StateReads } from '../../src/coalesce/claim.js';
import { outboxHighWater, recordRunStart } from '../../src/coalesce/run-start.js';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';
import { SeenValues } from '../../src/coalesce/seen.js';
import { PAYLOADS_PER_STATEMENT } from '../../src/payloads/store.js';
import { PAYLOADS_READY_CHANNEL } from '../../src/db/payloads-ready.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { coalesce } from '../../src/coalesce/run.js';
import {
  bodyEvents,
  openWebhook,
  outcomes,
  payloads,
  registerWebhooks,
  resetData,
  runCoalesce,
  silentLogger,
} from '../helpers/seed.js';
import { eventually } from '../helpers/receiver.js';

const db = useTestDatabase();

beforeEach(() => resetData(db.pool));

describe('coalescing', () => {
  it('collapses the EDITED events of one asset in a run into the latest, with the latest atom', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id, latest_atom_id) values (1, 10)');
    for (const title of ['a', 'b', 'c'])
      await db.pool.query('update assets set title = $1 where asset_id = 1', [title]);
    await db.pool.query('update assets set latest_atom_id = 11 where asset_id = 1');
    const { rows: edits } = await db.pool.query<{ event_id: string }>(
      "select event_id from asset_webhooks.waiting_events where event_type = 'EDITED' order by seq",
    );
    const lastEdit = edits.at(-1)!.event_id;

    await runCoalesce(db.pool, [crm]);

    const [payload] = await payloads(db.pool);
    expect(bodyEvents(payload!).map((e) => [e.eventType, e.atomId])).toEqual([
      ['CREATED', 10],
      ['EDITED', 11],
      ['REVERSION', 11],
    ]);
    expect(bodyEvents(payload!)[1]!.eventId).toBe(lastEdit);
    const collapsed = (await outcomes(db.pool)).filter((o) => o.outcome === 'collapsed');
    expect(collapsed.map((o) => o.event_id).sort()).toEqual(
      edits
        .slice(0, 2)
        .map((e) => e.event_id)
        .sort(),
    );
    // What trace and find-event show an operator: the id the edits went out under, as SQL derives it.
    const { rows: into } = await db.pool.query<{ collapsed_into: string }>(
      "select collapsed_into from asset_webhooks.events where event_type = 'EDITED' and collapsed_into is not null",
    );
    expect(into.map((row) => row.collapsed_into)).toEqual([lastEdit, lastEdit]);
  });

  it('collapses edits across chunks of one run', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 5) g');
    await db.pool.query("update assets set title = 'x'");
    await db.pool.query("update assets set title = 'y' where asset_id = 1");
    const result = await runCoalesce(db.pool, [crm], { chunkSize: 3 });
    expect(result.chunks).toBeGreaterThan(2);
    const events = (await payloads(db.pool)).flatMap(bodyEvents);
    expect(events.filter((e) => e.eventType === 'EDITED' && e.assetId === 1)).toHaveLength(1);
    expect(events.filter((e) => e.eventType === 'EDITED')).toHaveLength(5);
    // The earlier edit of asset 1, read in an earlier chunk, names the one that went out.
    const {
      rows: [earlier],
    } = await db.pool.query<{ collapsed_into: string }>(
      "select collapsed_into from asset_webhooks.events where asset_id = 1 and event_type = 'EDITED' and collapsed_into is not null",
    );
    const sent = events.find((e) => e.eventType === 'EDITED' && e.assetId === 1)!;
    expect(earlier!.collapsed_into).toBe(sent.eventId);
  });

  it('writes events in order of occurrence with the six contract fields and ISO timestamps', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 20) g');
    await db.pool.query("update assets set state = 'approved' where asset_id % 2 = 0");
    await runCoalesce(db.pool, [crm]);
    const [payload] = await payloads(db.pool);
    const body = JSON.parse(payload!.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['count', 'events', 'webhookTimestamp']);
    expect(body.count).toBe(30);
    expect(body.webhookTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const events = bodyEvents(payload!);
    for (const event of events) {
      expect(Object.keys(event)).toEqual(['atomId', 'eventId', 'eventTimestamp', 'assetId', 'assetUuid', 'eventType']);
      expect(event.eventTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    const times = events.map((e) => e.eventTimestamp);
    expect([...times].sort()).toEqual(times);
    expect(payload!.byte_size).toBe(Buffer.byteLength(payload!.body));
  });

  it('splits by batchSize, full payloads except the last per webhook per run', async () => {
    const small = openWebhook('small', { batchSize: 7 });
    await registerWebhooks(db.pool, [small]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 30) g');
    await runCoalesce(db.pool, [small], { chunkSize: 4 });
    const counts = (await payloads(db.pool)).map((p) => p.event_count);
    expect(counts).toEqual([7, 7, 7, 7, 2]);
    const ids = (await payloads(db.pool)).flatMap(bodyEvents).map((e) => e.assetId);
    expect(ids).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('splits by maxPayloadBytes, never exceeding the cap', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 40) g');
    await runCoalesce(db.pool, [crm], { maxPayloadBytes: 1024 });
    const stored = await payloads(db.pool);
    expect(stored.length).toBeGreaterThan(5);
    for (const payload of stored) {
      expect(payload.byte_size).toBeLessThanOrEqual(1024);
      expect((JSON.parse(payload.body) as { count: number }).count).toBe(payload.event_count);
    }
    // Full except the last: adding the next event would have crossed the cap.
    expect(stored.slice(0, -1).every((p) => p.byte_size > 1024 - 200)).toBe(true);
    expect(stored.reduce((n, p) => n + p.event_count, 0)).toBe(40);
  });

  it('writes every payload of a chunk whole when they take several statements', async () => {
    // 3 webhooks x 1,100 events in one chunk, two events a payload: 1,650
    // payloads, more than one statement takes (PAYLOADS_PER_STATEMENT).
    const hooks = ['crm', 'shop', 'search'].map((id) => openWebhook(id, { batchSize: 2 }));
    await registerWebhooks(db.pool, hooks);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 1100) g');
    await runCoalesce(db.pool, hooks, { chunkSize: 5000 });
    const stored = await payloads(db.pool);
    expect(stored).toHaveLength(1650);
    expect(stored.length).toBeGreaterThan(PAYLOADS_PER_STATEMENT);
    for (const hook of hooks) {
      const own = stored.filter((p) => p.webhook_id === hook.id);
      for (const payload of own) {
        expect(payload.byte_size).toBe(Buffer.byteLength(payload.body));
        expect(bodyEvents(payload)).toHaveLength(payload.event_count);
      }
      expect(own.flatMap(bodyEvents).map((e) => e.assetId)).toEqual(Array.from({ length: 1100 }, (_, i) => i + 1));
    }
  });

  it('stores one body for the payloads of webhooks whose filters agree, and each attempt sends it', async () => {
    // crm and shop receive everything; search only CREATED, two a payload: its payloads carry other lists of events.
    const hooks = [openWebhook('crm', { batchSize: 3 }), openWebhook('shop', { batchSize: 3 })];
    const search = { ...openWebhook('search', { batchSize: 2 }), eventTypes: ['CREATED' as const] };
    await registerWebhooks(db.pool, [...hooks, search]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 6) g');
    await db.pool.query("update assets set state = 'approved' where asset_id <= 3");
    await runCoalesce(db.pool, [...hooks, search]);
    const stored = await payloads(db.pool);
    const crm = stored.filter((p) => p.webhook_id === 'crm');
    const shop = stored.filter((p) => p.webhook_id === 'shop');
    expect(crm).toHaveLength(3);
    // The same events in the same order: shop's payloads name crm's bodies, and hold none of their own.
    expect(shop.map((p) => p.body_of)).toEqual(crm.map((p) => p.payload_id));
    expect(shop.map((p) => p.body)).toEqual(crm.map((p) => p.body));
    expect(shop.map((p) => p.byte_size)).toEqual(crm.map((p) => Buffer.byteLength(p.body)));
    const { rows: own } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'shop' and body <> ''",
    );
    expect(own[0]!.n).toBe(0);
    expect(crm.every((p) => p.body_of === null)).toBe(true);
    const searchPayloads = stored.filter((p) => p.webhook_id === 'search');
    expect(searchPayloads).toHaveLength(3);
    expect(searchPayloads.every((p) => p.body_of === null)).toBe(true);
    // A claim of a payload that names another's body sends that body.
    const claimed = await claimPayloads(db.pool, {
      now: new Date(),
      max: 100,
      share: 100,
      after: null,
      expireAfterSeconds: 86_400,
    });
    const byId = new Map(stored.map((p) => [p.payload_id, p.body]));
    expect(claimed.filter((c) => c.webhookId === 'shop')).toHaveLength(1);
    for (const c of claimed) expect(c.body).toBe(byId.get(c.payloadId));
  });

  it('excludes events of an asset purged since as asset_gone, but delivers PURGED', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) values (1)');
    await db.pool.query("update assets set state = 'x'");
    await db.pool.query('delete from assets');
    await runCoalesce(db.pool, [crm]);
    const byType = Object.fromEntries((await outcomes(db.pool)).map((o) => [o.event_type, [o.outcome, o.excluded_by]]));
    expect(byType).toEqual({
      CREATED: ['excluded', 'asset_gone'],
      EDITED: ['excluded', 'asset_gone'],
      PURGED: ['pending', null],
    });
    const [payload] = await payloads(db.pool);
    expect(bodyEvents(payload!)).toMatchObject([{ eventType: 'PURGED', atomId: null, assetId: 1 }]);
  });

  it('delivers PURGED for a TRUNCATE of assets and their keywords, and excludes the EDITED of the cascade as asset_gone', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query("insert into assets (asset_id) values (1), (2); insert into asset_keywords values (1, 'k')");
    await db.pool.query('truncate assets cascade');
    await runCoalesce(db.pool, [crm]);
    expect((await outcomes(db.pool)).map((o) => [o.event_type, o.asset_id, o.outcome, o.excluded_by]).sort()).toEqual([
      ['CREATED', 1, 'excluded', 'asset_gone'],
      ['CREATED', 2, 'excluded', 'asset_gone'],
      // The keyword's insert, collapsed into the edit the TRUNCATE captured.
      ['EDITED', 1, 'collapsed', null],
      ['EDITED', 1, 'excluded', 'asset_gone'],
      ['PURGED', 1, 'pending', null],
      ['PURGED', 2, 'pending', null],
    ]);
    const [payload] = await payloads(db.pool);
    expect(bodyEvents(payload!).map((e) => [e.eventType, e.assetId])).toEqual([
      ['PURGED', 1],
      ['PURGED', 2],
    ]);
  });

  it('sends nothing to a disabled webhook, not even PURGED, and records why', async () => {
    const off = openWebhook('off', { enabled: false });
    await registerWebhooks(db.pool, [off]);
    await db.pool.query('insert into assets (asset_id) values (1); delete from assets');
    await runCoalesce(db.pool, [off]);
    expect(await payloads(db.pool)).toEqual([]);
    expect((await outcomes(db.pool)).map((o) => [o.event_type, o.excluded_by])).toEqual([
      ['CREATED', 'disabled'],
      ['PURGED', 'disabled'],
    ]);
  });

  it("records the webhook's own check by name and routes PURGED past it", async () => {
    const picky = openWebhook('picky', {
      filters: [
        { filterKind: 'keywords', condition: 'NONE', value: ['archive'] },
        { filterKind: 'keywords', condition: 'ANY', value: ['summer'] },
      ],
    });
    await registerWebhooks(db.pool, [picky]);
    await db.pool.query('insert into assets (asset_id) values (1), (2); delete from assets where asset_id = 2');
    await runCoalesce(db.pool, [picky]);
    expect((await outcomes(db.pool)).map((o) => [o.event_type, o.asset_id, o.outcome, o.excluded_by])).toEqual([
      ['CREATED', 1, 'excluded', 'filter:2'],
      ['CREATED', 2, 'excluded', 'asset_gone'],
      ['PURGED', 2, 'pending', null],
    ]);
  });

  it('consumes the outbox: a second run finds nothing', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) values (1)');
    expect((await runCoalesce(db.pool, [crm])).events).toBe(1);
    expect((await runCoalesce(db.pool, [crm])).events).toBe(0);
    const { rows } = await db.pool.query('select count(*)::int as n from asset_webhooks.outbox');
    expect(rows[0]).toEqual({ n: 0 });
  });

  it('takes the events of a transaction that stayed open across a run in the next run', async () => {
    const crm = openWebhook('crm');
    await registerWebhooks(db.pool, [crm]);
    const late = await db.pool.connect();
    try {
      await late.query('begin');
      await late.query('insert into assets (asset_id) values (1)');
      await db.pool.query('insert into assets (asset_id) values (2)');
      expect((await runCoalesce(db.pool, [crm])).events).toBe(1);
      await late.query('commit');
    } finally {
      late.release();
    }
    expect((await runCoalesce(db.pool, [crm])).events).toBe(1);
    const carried = (await payloads(db.pool)).flatMap(bodyEvents).map((e) => e.assetId);
    expect(carried).toEqual([2, 1]);
  });

  it('leaves a row that commits during a run below the chunks already read to the next run, once', async () => {
    const late = await db.pool.connect();
    let committed: Promise<unknown> | undefined;
    // The first chunk's write (which reads the clock for its payloads)
    // commits the open transaction: its row (the lowest seq) becomes visible
    // while the run reads the chunks after it.
    const crm = openWebhook('crm');
    const now = (): Date => {
      committed ??= late.query('commit');
      return new Date();
    };
    await registerWebhooks(db.pool, [crm]);
    try {
      await late.query('begin');
      await late.query('insert into assets (asset_id) values (1)');
      await db.pool.query('insert into assets (asset_id) select g from generate_series(2, 4) g');
      const run = await coalesce({
        pool: db.pool,
        webhooks: [crm],
        maxPayloadBytes: 1 << 24,
        chunkSize: 1,
        logger: silentLogger,
        now,
      });
      expect(run.events).toBe(3);
      await committed;
    } finally {
      late.release();
    }
    const { rows } = await db.pool.query('select asset_id from asset_webhooks.outbox');
    expect(rows).toEqual([{ asset_id: 1 }]);
    expect((await runCoalesce(db.pool, [crm], { chunkSize: 1 })).events).toBe(1);
    const carried = (await payloads(db.pool)).flatMap(bodyEvents).map((e) => e.assetId);
    expect(carried).toEqual([2, 3, 4, 1]);
  });

  it('seals a payload a failed run left open with the events that name it, in order, once', async () => {
    const crm = openWebhook('crm', { batchSize: 10 });
    // The clock is read once per chunk written and once to seal the run's last payloads: that fails.
    let reads = 0;
    const now = (): Date => {
      reads += 1;
      if (reads === 4) throw new Error('sealing failed');
      return new Date();
    };
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 3) g');
    await expect(
      coalesce({ pool: db.pool, webhooks: [crm], maxPayloadBytes: 1 << 24, chunkSize: 1, logger: silentLogger, now }),
    ).rejects.toThrow('sealing failed');
    expect((await payloads(db.pool)).map((p) => [p.status, p.event_count])).toEqual([['open', 0]]);
    const run = await runCoalesce(db.pool, [crm]);
    expect(run.events).toBe(0);
    const [sealed] = await payloads(db.pool);
    expect([sealed!.status, sealed!.event_count, sealed!.byte_size]).toEqual([
      'pending',
      3,
      Buffer.byteLength(sealed!.body),
    ]);
    expect(bodyEvents(sealed!).map((e) => [e.eventType, e.assetId])).toEqual([
      ['CREATED', 1],
      ['CREATED', 2],
      ['CREATED', 3],
    ]);
    const { rows } = await db.pool.query<{ event_ids: string[] }>('select event_ids from asset_webhooks.payloads');
    expect(rows[0]!.event_ids).toEqual(bodyEvents(sealed!).map((e) => e.eventId));
    expect((await outcomes(db.pool)).map((o) => [o.asset_id, o.outcome, o.payload_id])).toEqual(
      [1, 2, 3].map((id) => [id, 'pending', sealed!.payload_id]),
    );
  });

  it('keeps the chunks written before a chunk that fails, leaves the rest in the outbox and frees the run', async () => {
    const failing = openWebhook('crm');
    // The clock is read once per chunk written: the second chunk (asset 2) fails.
    let chunks = 0;
    const now = (): Date => {
      chunks += 1;
      if (chunks === 2) throw new Error('chunk failed');
      return new Date();
    };
    await registerWebhooks(db.pool, [failing]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 3) g');
    await expect(
      coalesce({
        pool: db.pool,
        webhooks: [failing],
        maxPayloadBytes: 1 << 24,
        chunkSize: 1,
        logger: silentLogger,
        now,
      }),
    ).rejects.toThrow('chunk failed');
    const { rows } = await db.pool.query('select asset_id from asset_webhooks.outbox order by seq');
    expect(rows).toEqual([{ asset_id: 2 }, { asset_id: 3 }]);
    expect((await runCoalesce(db.pool, [openWebhook('crm')], { chunkSize: 1 })).events).toBe(2);
    const carried = (await payloads(db.pool)).flatMap(bodyEvents).map((e) => e.assetId);
    expect(carried).toEqual([1, 2, 3]);
  });

  it('produces each payload once when two runs start at the same moment', async () => {
    const crm = openWebhook('crm', { batchSize: 10 });
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 500) g');
    const results = await Promise.all([
      runCoalesce(db.pool, [crm], { chunkSize: 50 }),
      runCoalesce(db.pool, [crm], { chunkSize: 50 }),
    ]);
    expect(results.reduce((n, r) => n + r.events, 0)).toBe(500);
    const events = (await payloads(db.pool)).flatMap(bodyEvents);
    expect(events).toHaveLength(500);
    expect(new Set(events.map((e) => e.eventId)).size).toBe(500);
  });

  it('wakes the delivery pumps once its payloads are committed (NOTIFY on the payloads-ready channel)', async () => {
    const crm = openWebhook('crm', { batchSize: 5 });
    await registerWebhooks(db.pool, [crm]);
    await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 20) g');
    const listener = await db.pool.connect();
    try {
      const notified: string[] = [];
      listener.on('notification', (message) => notified.push(message.channel));
      await listener.query(`listen ${PAYLOADS_READY_CHANNEL}`);
      await runCoalesce(db.pool, [crm]);
      await eventually(async () => (notified.length > 0 ? true : undefined), {
        timeoutMs: 5_000,
        what: 'a notification',
      });
      expect(new Set(notified)).toEqual(new Set([PAYLOADS_READY_CHANNEL]));
      await listener.query(`unlisten ${PAYLOADS_READY_CHANNEL}`);
    } finally {
      listener.release();
    }
  });

  it("defers an edit that commits after the run recorded the latest edits, later than its asset's recorded edit", async () => {
    await db.pool.query('insert into assets (asset_id) values (1), (2)');
    await db.pool.query('delete from asset_webhooks.outbox');
    await db.pool.query("update assets set title = 'committed first' where asset_id = 1");
    const late = await db.pool.connect();
    const session = await db.pool.connect();
    try {
      await late.query('begin');
      await late.query("update assets set title = 'commits late' where asset_id = 1");
      await late.query('update assets set trashed_at = now() where asset_id = 1');
      await db.pool.query("update assets set title = 'after' where asset_id = 2");
      const maxSeq = (await outboxHighWater(db.pool))!;
      const ids = await recordRunStart(session, maxSeq);
      await late.query('commit');
      const claim = async (limit: number) => {
        await session.query('begin');
        try {
          return await claimChunk(session, ids, maxSeq, 0, limit);
        } finally {
          await session.query('rollback');
        }
      };
      // The late rows lie between the two and were not seen by recordRunStart:
      // they are read (the next chunk starts after them) but left for the next
      // run, the edit and the trashing after it, so asset 1's events keep their order.
      const both = await claim(10);
      expect(both.events.map((row) => [row.assetId, row.eventType])).toEqual([
        ['1', 'EDITED'],
        ['2', 'EDITED'],
      ]);
      expect(both).toMatchObject({ read: 4, deferred: 2, lastSeq: maxSeq });
      // The earlier edit is the recorded latest of asset 1: it is sent, not collapsed into the late one.
      const [first] = both.events;
      expect(first!.latestEditId).toBe(first!.eventId);
      // In a chunk of its own before the late row: the recorded latest (itself).
      const [alone] = (await claim(1)).events;
      expect(alone!.latestEditId).toBe(alone!.eventId);
      // A chunk of the late row alone: read, nothing to coalesce, and the run goes on after it.
      const lateOnly = await claimChunk(session, ids, maxSeq, alone!.seq, 1);
      expect(lateOnly).toMatchObject({ events: [], read: 1, deferred: 1 });
    } finally {
      await late.query('rollback').catch(() => {});
      late.release();
      session.release();
    }
  });
});

it('a run that fails after some chunks shows what it committed, and the runbook calls it interrupted', async () => {
  const crm = openWebhook('crm');
  await registerWebhooks(db.pool, [crm]);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 5) g');
  // The third event's chunk fails as a crash would end it: after two chunks committed.
  await db.pool.query(`create function public.aw_test_fail_third() returns trigger language plpgsql as $$
    begin if new.asset_id = 3 then raise exception 'the worker died'; end if; return new; end $$`);
  await db.pool.query(
    'create trigger fail_third before insert on asset_webhooks.events for each row execute function public.aw_test_fail_third()',
  );
  try {
    await expect(runCoalesce(db.pool, [crm], { chunkSize: 1 })).rejects.toThrow(/the worker died/);
  } finally {
    await db.pool.query('drop trigger fail_third on asset_webhooks.events');
    await db.pool.query('drop function public.aw_test_fail_third()');
  }
  await runCoalesce(db.pool, [crm], { chunkSize: 1 });
  const { rows } = await db.pool.query<{ events: number; finished: boolean }>(
    'select events, finished_at is not null as finished from asset_webhooks.coalesce_runs order by run_id',
  );
  expect(rows).toEqual([
    { events: 2, finished: false },
    { events: 3, finished: true },
  ]);
  const runbook = fileURLToPath(new URL('../../sql/runbooks/backlog-and-lag.sql', import.meta.url));
  const { stdout } = await promisify(execFile)('psql', [db.url, '-X', '-v', 'ON_ERROR_STOP=1', '-f', runbook]);
  expect(stdout).toMatch(/\|\s+2\s+\|\s+\d+\s+\|\s+interrupted\n/);
  expect(stdout).toMatch(/\|\s+3\s+\|\s+\d+\s+\|\s+finished\n/);
});

/**
 * A run in chunks of one row whose first chunk's write waits on a lock of the
 * events table, while the run reads ahead as far as it does (the second chunk
 * routed, the third read); `meanwhile` runs once those reads are done (a late
 * transaction commits there), then the write goes on, and the fourth chunk is
 * read after `meanwhile`.
 */
async function runWithFirstWriteHeld(webhooks: Parameters<typeof runCoalesce>[1], meanwhile: () => Promise<unknown>) {
  const blocker = await db.pool.connect();
  try {
    await blocker.query('begin');
    await blocker.query('lock table asset_webhooks.events in exclusive mode');
    const running = runCoalesce(db.pool, webhooks, { chunkSize: 1 });
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ waiting: number; claiming: number }>(
          `select count(*) filter (where wait_event_type = 'Lock')::int as waiting,
                count(*) filter (where query like '%with claimed as materialized%'
                                   and (state = 'active' or state_change > clock_timestamp() - interval '500 milliseconds'))::int as claiming
         from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
        );
        // The read session has been idle for half a second: the reads the run
        // makes ahead of a held write are done (the next one starts as soon as
        // the one before it returns).
        return rows[0]!.waiting > 0 && rows[0]!.claiming === 0 ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the first chunk to wait for its write, with the next two read' },
    );
    await meanwhile();
    await blocker.query('commit');
    return await running;
  } finally {
    await blocker.query('rollback').catch(() => {});
    blocker.release();
  }
}

it("a transaction whose first change of an asset a run passed before it committed has its later changes of that asset wait too: the asset's events stay in order", async () => {
  const crm = openWebhook('crm');
  await registerWebhooks(db.pool, [crm]);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 5) g');
  await runCoalesce(db.pool, [crm]);
  const late = await db.pool.connect();
  try {
    // Outbox, in seq order: an edit of asset 2, the late transaction's edit of
    // asset 1, edits of assets 3 and 5, the late transaction's new version of
    // asset 1 (not an edit: nothing else would defer it), an edit of asset 4.
    // (A move to the Trash would do too, but would exclude the edit as in_trash.)
    await db.pool.query("update assets set title = 'b' where asset_id = 2");
    await late.query('begin');
    await late.query("update assets set title = 'late' where asset_id = 1");
    await db.pool.query("update assets set title = 'c' where asset_id = 3");
    await db.pool.query("update assets set title = 'e' where asset_id = 5");
    await late.query('update assets set latest_atom_id = 7 where asset_id = 1');
    await db.pool.query("update assets set title = 'd' where asset_id = 4");
    // The second chunk passes the late edit while it is not committed; the
    // late transaction commits before the fourth is read.
    expect((await runWithFirstWriteHeld([crm], () => late.query('commit'))).deferred).toBe(1);
  } finally {
    await late.query('rollback').catch(() => {});
    late.release();
  }
  await runCoalesce(db.pool, [crm]);
  const carried = (await payloads(db.pool))
    .flatMap(bodyEvents)
    .filter((e) => e.assetId === 1)
    .map((e) => e.eventType);
  expect(carried).toEqual(['CREATED', 'EDITED', 'REVERSION']);
  const { rows } = await db.pool.query<{ event_type: string; run_id: number }>(
    "select event_type, run_id::int from asset_webhooks.events where asset_id = 1 and event_type <> 'CREATED' order by seq",
  );
  expect(rows.map((row) => row.event_type)).toEqual(['EDITED', 'REVERSION']);
  expect(rows[0]!.run_id).toBe(rows[1]!.run_id);
});

it("an edit that commits while a run goes on, later than the run's latest edit of its asset, waits for the next run: never two EDITED of one asset in a run", async () => {
  const crm = openWebhook('crm');
  await registerWebhooks(db.pool, [crm]);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 4) g');
  await runCoalesce(db.pool, [crm]);
  // Outbox, in seq order: edits of assets 1, 2 and 4 (committed), a keyword of
  // asset 1 and a new version of it (in a transaction left open), an edit of asset 3.
  await db.pool.query("update assets set title = 'a' where asset_id = 1");
  await db.pool.query("update assets set title = 'b' where asset_id = 2");
  await db.pool.query("update assets set title = 'd' where asset_id = 4");
  const late = await db.pool.connect();
  try {
    await late.query('begin');
    await late.query("insert into asset_keywords (asset_id, value) values (1, 'late')");
    await late.query('update assets set latest_atom_id = 7 where asset_id = 1');
    await db.pool.query("update assets set title = 'c' where asset_id = 3");
    // The late transaction commits before the fourth chunk is read. The fourth
    // chunk then holds only the deferred edit: the run goes on to the fifth.
    await runWithFirstWriteHeld([crm], () => late.query('commit'));
  } finally {
    await late.query('rollback').catch(() => {});
    late.release();
  }
  await runCoalesce(db.pool, [crm]);
  const { rows } = await db.pool.query<{ run_id: number; asset_id: number; edits: number }>(
    `select run_id::int, asset_id::int, count(*)::int as edits from asset_webhooks.events
     where event_type = 'EDITED' and collapsed_into is null group by run_id, asset_id order by run_id, asset_id`,
  );
  // Run 2 sends the four committed edits; run 3 the late keyword edit of asset 1.
  expect(rows.map(({ asset_id, edits }) => [asset_id, edits])).toEqual([
    [1, 1],
    [2, 1],
    [3, 1],
    [4, 1],
    [1, 1],
  ]);
  expect(new Set(rows.slice(0, 4).map((row) => row.run_id)).size).toBe(1);
  expect(rows[4]!.run_id).toBeGreaterThan(rows[0]!.run_id);
  // The new version, read by the run in a chunk after the deferred edit, waits with
  // it: asset 1's events reach the receiver in the order they happened.
  const carried = (await payloads(db.pool))
    .flatMap(bodyEvents)
    .filter((e) => e.assetId === 1)
    .map((e) => e.eventType);
  expect(carried).toEqual(['CREATED', 'EDITED', 'EDITED', 'REVERSION']);
  const { rows: versioned } = await db.pool.query<{ run_id: number }>(
    "select run_id::int from asset_webhooks.events where event_type = 'REVERSION'",
  );
  expect(versioned).toEqual([{ run_id: rows[4]!.run_id }]);
});

it("writes each chunk's payloads as that chunk left them: a batch a later chunk fills is not written with events that chunk has not committed", async () => {
  // A batch of three, one event per chunk: the third chunk seals the batch
  // the first two wrote as open. The first write is held while the second
  // chunk is routed, and the third chunk's write fails.
  const crm = openWebhook('crm', { batchSize: 3 });
  await registerWebhooks(db.pool, [crm]);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 3) g');
  await db.pool.query(`
    create function public.aw_test_refuse_asset_3() returns trigger language plpgsql as $$
    begin
      if new.asset_id = 3 then raise exception 'the third chunk fails'; end if;
      return new;
    end $$;
    create trigger aw_test_refuse_asset_3 before insert on asset_webhooks.events
      for each row execute function public.aw_test_refuse_asset_3();`);
  try {
    await expect(runWithFirstWriteHeld([crm], async () => {})).rejects.toThrow('the third chunk fails');
  } finally {
    await db.pool.query('drop function public.aw_test_refuse_asset_3() cascade');
  }
  // The second chunk committed the batch as open, without its body: the
  // sealing by the third chunk was not written, so no payload carries an
  // event that is still in the outbox.
  const { rows: stored } = await db.pool.query<{ status: string; event_count: number }>(
    "select status, event_count from asset_webhooks.payloads where webhook_id = 'crm'",
  );
  expect(stored).toEqual([{ status: 'open', event_count: 0 }]);
  const { rows: moved } = await db.pool.query<{ asset_id: number }>(
    'select asset_id::int from asset_webhooks.events order by seq',
  );
  expect(moved.map((row) => row.asset_id)).toEqual([1, 2]);

  // The next run seals the open payload with the two events that name it, and sends the third once.
  await runCoalesce(db.pool, [crm]);
  const sent = (await payloads(db.pool)).map((payload) => bodyEvents(payload).map((e) => e.assetId));
  expect(sent).toEqual([[1, 2], [3]]);
});

it('runs on two connections and gives them back committing synchronously, as delivery needs its attempt records', async () => {
  const crm = openWebhook('crm', { batchSize: 1 });
  await registerWebhooks(db.pool, [crm]);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 20) g');
  // Connections that commit synchronously whatever the test server's default.
  const pool = new pg.Pool({ connectionString: db.url, max: 2, options: '-c synchronous_commit=on' });
  try {
    const result = await coalesce({
      pool,
      webhooks: [crm],
      maxPayloadBytes: 16 * 1024 * 1024,
      chunkSize: 5,
      logger: silentLogger,
    });
    expect(result).toMatchObject({ events: 20, payloads: 20, chunks: 4 });
    // Both connections of the pool, the run's session and its writer.
    const clients = [await pool.connect(), await pool.connect()];
    try {
      const settings = await Promise.all(
        clients.map(
          async (client) =>
            (await client.query<{ s: string }>("select current_setting('synchronous_commit') as s")).rows[0]!.s,
        ),
      );
      expect(settings).toEqual(['on', 'on']);
    } finally {
      for (const client of clients) client.release();
    }
  } finally {
    await pool.end();
  }
});

it("reads an asset's keywords and fields only when some enabled webhook's filters read them", async () => {
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, 20) g');
  await db.pool.query("insert into asset_keywords (asset_id, value) select g, 'summer' from generate_series(1, 20) g");
  await db.pool.query(
    "insert into asset_additional_fields (asset_id, name, value) select g, 'campaign', '2026' from generate_series(1, 20) g",
  );
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  try {
    const maxSeq = (await outboxHighWater(db.pool))!;
    const ids = await recordRunStart(session as unknown as pg.PoolClient, maxSeq);
    // Index scans of each list's table, in a transaction whose own counts hold only the claim's.
    const claimed = async (reads: StateReads) => {
      await session.query('select pg_stat_force_next_flush()');
      await session.query('begin');
      try {
        const chunk = await claimChunk(session as unknown as pg.PoolClient, ids, maxSeq, 0, 100, { reads });
        const { rows } = await session.query<{ relname: string; scans: string }>(
          `select relname, coalesce(idx_scan, 0) + coalesce(seq_scan, 0) as scans from pg_stat_xact_user_tables
           where relname in ('asset_keywords', 'asset_additional_fields') order by relname`,
        );
        const asset = chunk.events[0]!.asset!;
        return {
          scans: Object.fromEntries(rows.map((row) => [row.relname, Number(row.scans)])),
          keywords: asset.keywords,
          fields: asset.fieldNames,
        };
      } finally {
        await session.query('rollback');
      }
    };
    expect(await claimed({ keywords: true, fields: true })).toEqual({
      scans: { asset_additional_fields: 20, asset_keywords: 20 },
      keywords: ['summer'],
      fields: ['campaign'],
    });
    expect(await claimed({ keywords: false, fields: true })).toEqual({
      scans: { asset_additional_fields: 20, asset_keywords: 0 },
      keywords: [],
      fields: ['campaign'],
    });
    expect(await claimed({ keywords: false, fields: false })).toEqual({
      scans: { asset_additional_fields: 0, asset_keywords: 0 },
      keywords: [],
      fields: [],
    });
  } finally {
    await session.end();
  }
  // What a run reads follows its enabled webhooks' filters.
  expect(new SeenValues([openWebhook('crm')]).reads).toEqual({ keywords: false, fields: false });
  const tagged: RoutedWebhook = {
    ...openWebhook('shop'),
    filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['summer'] }],
  };
  expect(new SeenValues([tagged]).reads).toEqual({ keywords: true, fields: false });
  expect(new SeenValues([{ ...tagged, enabled: false }]).reads).toEqual({ keywords: false, fields: false });
});
