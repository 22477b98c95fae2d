import { beforeEach, describe, expect, it } from 'vitest';
import type pg from 'pg';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';
import { pino } from 'pino';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { reconcile } from '../../src/mirror/reconcile.js';
import { webhook } from '../helpers/assets.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';

const db = useTestDatabase();

beforeEach(async () => {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
});

const shop = [{ filterKind: 'keywords' as const, condition: 'ANY' as const, value: ['shop'] }];
const mirror = (overrides: Partial<RoutedWebhook> = {}): RoutedWebhook =>
  openWebhook('copy', { mirror: true, filters: shop, ...overrides });
const plain = openWebhook('plain', { filters: shop });
/** The document's webhook of `mirror()`, for a reconcile. */
const configured = webhook(
  'id: copy, mirror: true, filters: [{ filterKind: keywords, condition: ANY, value: [shop] }]',
);

/** Every event each webhook got, in payload order: [assetId, eventType]. */
async function sent(pool: pg.Pool, webhookId: string): Promise<Array<[number, string]>> {
  return (await payloads(pool, webhookId)).flatMap(bodyEvents).map((e) => [e.assetId, e.eventType]);
}

async function members(pool: pg.Pool): Promise<Array<[number, boolean]>> {
  const { rows } = await pool.query<{ asset_id: string; member: boolean }>(
    "select asset_id, 'copy' = any(webhooks) as member from asset_webhooks.mirror_members order by asset_id",
  );
  return rows.map((row) => [Number(row.asset_id), row.member]);
}

describe('a mirror webhook', () => {
  it('gets UNMATCHED when an asset of its set stops passing its filters, and a plain webhook gets nothing', async () => {
    const webhooks = [mirror(), plain];
    await registerWebhooks(db.pool, webhooks);
    await db.pool.query('insert into assets (asset_id, latest_atom_id) values (1, 10)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop')");
    await runCoalesce(db.pool, webhooks);
    expect(await members(db.pool)).toEqual([[1, true]]);

    await db.pool.query("delete from asset_keywords where asset_id = 1 and value = 'shop'");
    await runCoalesce(db.pool, webhooks);
    // CREATED passes too: the asset is read when the run routes, with its keyword.
    expect(await sent(db.pool, 'copy')).toEqual([
      [1, 'CREATED'],
      [1, 'EDITED'],
      [1, 'UNMATCHED'],
    ]);
    expect(await sent(db.pool, 'plain')).toEqual([
      [1, 'CREATED'],
      [1, 'EDITED'],
    ]);
    expect(await members(db.pool)).toEqual([[1, false]]);
    const unmatched = (await payloads(db.pool, 'copy')).flatMap(bodyEvents).at(-1)!;
    expect(unmatched.atomId).toBe(10);

    // What an operator sees: the event that caused it, the check, and how it was sent.
    const { rows } = await db.pool.query(
      `select webhook_id, outcome, excluded_by, sent_as from asset_webhooks.event_outcomes
       where event_id = $1 order by webhook_id`,
      [unmatched.eventId],
    );
    expect(rows).toEqual([
      { webhook_id: 'copy', outcome: 'pending', excluded_by: 'filter:1', sent_as: 'UNMATCHED' },
      { webhook_id: 'plain', outcome: 'excluded', excluded_by: 'filter:1', sent_as: null },
    ]);

    // Excluded again while out of the set: nothing more.
    await db.pool.query("update assets set title = 'x' where asset_id = 1");
    await runCoalesce(db.pool, webhooks);
    expect(await sent(db.pool, 'copy')).toHaveLength(3);
    // Back in: an EDITED, and a member again.
    await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop')");
    await runCoalesce(db.pool, webhooks);
    expect((await sent(db.pool, 'copy')).at(-1)).toEqual([1, 'EDITED']);
    expect(await members(db.pool)).toEqual([[1, true]]);
  });

  it('sends UNMATCHED for a move out of its resource types or to a parent, and removes the asset on PURGED', async () => {
    const webhooks = [mirror({ resourceTypes: ['Resource'] })];
    await registerWebhooks(db.pool, webhooks);
    await db.pool.query('insert into assets (asset_id) values (1), (2), (3), (4)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop'), (2, 'shop'), (3, 'shop')");
    await runCoalesce(db.pool, webhooks);
    const first = (await sent(db.pool, 'copy')).length;
    await db.pool.query("update assets set supertype = 'Project' where asset_id = 1");
    await db.pool.query('update assets set parent_id = 4 where asset_id = 2');
    await db.pool.query('delete from asset_keywords where asset_id = 3');
    await db.pool.query('delete from assets where asset_id = 3');
    await runCoalesce(db.pool, webhooks);
    const last = (await sent(db.pool, 'copy')).slice(first);
    expect(last).toEqual([
      [1, 'UNMATCHED'],
      [2, 'UNMATCHED'],
      [3, 'PURGED'],
    ]);
    const { rows } = await db.pool.query(
      `select asset_id::int, excluded_by from asset_webhooks.event_outcomes where sent_as = 'UNMATCHED' order by asset_id`,
    );
    expect(rows).toEqual([
      { asset_id: 1, excluded_by: 'resource_type' },
      { asset_id: 2, excluded_by: 'parent' },
    ]);
    expect(await members(db.pool)).toEqual([
      [1, false],
      [2, false],
      [3, false],
    ]);
  });

  it("raises an eventTimestamp to after the last one sent for the asset to a mirror webhook, for every webhook alike, so one asset's timestamps strictly increase", async () => {
    const webhooks = [mirror(), plain];
    await registerWebhooks(db.pool, webhooks);
    await db.pool.query('insert into assets (asset_id) values (1)');
    const last = new Date(Date.now() + 3_600_000);
    await db.pool.query(
      `insert into asset_webhooks.mirror_members (asset_id, webhooks, last_event_at) values (1, '{}', $1)`,
      [last.toISOString()],
    );
    await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop')");
    await runCoalesce(db.pool, webhooks);
    const [copied] = (await payloads(db.pool, 'copy')).flatMap(bodyEvents);
    const [plainEvent] = (await payloads(db.pool, 'plain')).flatMap(bodyEvents);
    expect(copied!.eventId).toBe(plainEvent!.eventId);
    expect(copied!.eventTimestamp).toBe(new Date(last.getTime() + 1).toISOString());
    // One time for every webhook (src/coalesce/clock.ts): the payloads can share one body.
    expect(plainEvent!.eventTimestamp).toBe(copied!.eventTimestamp);
  });
});

describe('reconcile', () => {
  it('sends EDITED for what now passes and is not in the set, UNMATCHED for members that no longer pass or are gone, once', async () => {
    const before = [mirror()];
    await registerWebhooks(db.pool, before);
    await db.pool.query('insert into assets (asset_id) values (1), (2), (3), (4), (5)');
    await db.pool.query(
      `insert into asset_keywords (asset_id, value) values (1, 'shop'), (2, 'web'), (3, 'web'), (4, 'shop'), (5, 'shop'), (5, 'web')`,
    );
    await runCoalesce(db.pool, before);
    expect(await members(db.pool)).toEqual([
      [1, true],
      [4, true],
      [5, true],
    ]);
    // Asset 4 is purged while the webhook is disabled: its PURGED never reaches it.
    await runCoalesce(db.pool, [mirror({ enabled: false })]);
    await db.pool.query('update assets set trashed_at = now() where asset_id = 3');
    await db.pool.query('delete from asset_keywords where asset_id = 4');
    await db.pool.query('delete from assets where asset_id = 4');
    await runCoalesce(db.pool, [mirror({ enabled: false })]);
    const count = (await sent(db.pool, 'copy')).length;

    // The filter changes from shop to web.
    const after = webhook(
      'id: copy, mirror: true, resourceTypes: [Resource, Project, Adaptation, Template], filters: [{ filterKind: keywords, condition: ANY, value: [web] }]',
    );
    const dry = await reconcile({ pool: db.pool, webhook: after, maxPayloadBytes: 1 << 24, dryRun: true });
    expect(dry).toMatchObject({ editedSent: 1, unmatchedSent: 2, status: 'completed', dryRun: true });
    expect((await sent(db.pool, 'copy')).length).toBe(count);

    const result = await reconcile({ pool: db.pool, webhook: after, maxPayloadBytes: 1 << 24 });
    expect(result).toMatchObject({ editedSent: 1, unmatchedSent: 2, status: 'completed', assetsRead: 4 });
    expect((await sent(db.pool, 'copy')).slice(count)).toEqual([
      [1, 'UNMATCHED'],
      [2, 'EDITED'],
      [4, 'UNMATCHED'],
    ]);
    expect(await members(db.pool)).toEqual([
      [1, false],
      [2, true],
      [4, false],
      [5, true],
    ]);
    const { rows } = await db.pool.query(
      `select asset_id::int, sent_as, excluded_by, outcome from asset_webhooks.event_outcomes
       where reconcile_id = $1 order by asset_id`,
      [result.reconcileId],
    );
    expect(rows).toEqual([
      { asset_id: 1, sent_as: 'UNMATCHED', excluded_by: 'filter:1', outcome: 'pending' },
      { asset_id: 2, sent_as: 'EDITED', excluded_by: null, outcome: 'pending' },
      { asset_id: 4, sent_as: 'UNMATCHED', excluded_by: 'asset_gone', outcome: 'pending' },
    ]);

    // Again: the set already is what the checks give.
    const again = await reconcile({ pool: db.pool, webhook: after, maxPayloadBytes: 1 << 24 });
    expect(again).toMatchObject({ editedSent: 0, unmatchedSent: 0, status: 'completed', resumed: false });
  });
});

describe('reconcile after the webhook was disabled', () => {
  it('puts right the members moved to the Trash or restored meanwhile, and leaves one whose last event retention dropped', async () => {
    const webhooks = [mirror()];
    await registerWebhooks(db.pool, webhooks);
    await db.pool.query('insert into assets (asset_id) values (1), (2), (3)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop'), (2, 'shop'), (3, 'shop')");
    await runCoalesce(db.pool, webhooks);
    await db.pool.query('update assets set trashed_at = now() where asset_id = 2');
    await runCoalesce(db.pool, webhooks);
    // The receiver holds 1 and 3 active, 2 in the Trash. Then, disabled: 1 and 3 trashed, 2 restored.
    await db.pool.query('update assets set trashed_at = now() where asset_id in (1, 3)');
    await db.pool.query('update assets set trashed_at = null where asset_id = 2');
    await runCoalesce(db.pool, [mirror({ enabled: false })]);
    // Retention dropped the events of 3: what its receiver holds is not known.
    await db.pool.query('delete from asset_webhooks.events where asset_id = 3');
    const count = (await sent(db.pool, 'copy')).length;

    const dry = await reconcile({ pool: db.pool, webhook: configured, maxPayloadBytes: 1 << 24, dryRun: true });
    expect(dry).toMatchObject({ editedSent: 1, unmatchedSent: 1, status: 'completed', dryRun: true });
    const result = await reconcile({ pool: db.pool, webhook: configured, maxPayloadBytes: 1 << 24 });
    expect(result).toMatchObject({ editedSent: 1, unmatchedSent: 1, status: 'completed' });
    expect((await sent(db.pool, 'copy')).slice(count)).toEqual([
      [1, 'UNMATCHED'],
      [2, 'EDITED'],
    ]);
    expect(await members(db.pool)).toEqual([
      [1, false],
      [2, true],
      [3, true],
    ]);
    const { rows } = await db.pool.query(
      `select asset_id::int, sent_as, excluded_by from asset_webhooks.event_outcomes
       where reconcile_id = $1 order by asset_id`,
      [result.reconcileId],
    );
    expect(rows).toEqual([
      { asset_id: 1, sent_as: 'UNMATCHED', excluded_by: 'in_trash' },
      { asset_id: 2, sent_as: 'EDITED', excluded_by: null },
    ]);

    // Restored, 1 comes back by its EDITED; a reconcile then has nothing to send.
    await db.pool.query('update assets set trashed_at = null where asset_id = 1');
    await runCoalesce(db.pool, webhooks);
    expect((await sent(db.pool, 'copy')).at(-1)).toEqual([1, 'EDITED']);
    const again = await reconcile({ pool: db.pool, webhook: configured, maxPayloadBytes: 1 << 24 });
    expect(again).toMatchObject({ editedSent: 0, unmatchedSent: 0, status: 'completed' });
  });
});

it('retention deletes old events and payloads but never membership', async () => {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.mirror_members');
  const webhooks = [mirror()];
  await registerWebhooks(db.pool, webhooks);
  await db.pool.query('insert into assets (asset_id) values (1)');
  await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop')");
  await runCoalesce(db.pool, webhooks);
  await db.pool.query(
    "update asset_webhooks.payloads set status = 'delivered', delivered_at = now() - interval '60 days'",
  );
  await db.pool.query(
    "update asset_webhooks.events set coalesced_at = now() - interval '60 days', occurred_at = now() - interval '60 days'",
  );
  await db.pool.query(
    "update asset_webhooks.mirror_members set changed_at = now() - interval '60 days', last_event_at = now() - interval '60 days'",
  );
  await runMaintenance({ pool: db.pool, retentionDays: 30, logger: pino({ level: 'silent' }) });
  const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from asset_webhooks.events');
  expect(rows[0]!.n).toBe(0);
  expect(await members(db.pool)).toEqual([[1, true]]);
});
