import { expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { routedWebhooks } from '../../src/coalesce/routed-webhooks.js';
import { explainWebhook } from '../../src/filters/explain.js';
import { readAssetState } from '../../src/db/asset-state.js';
import type { AssetState, EventType } from '../../src/interfaces.js';
import { registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

const config = parseConfigText(
  `assetUpdater:
  webhooks:
    - { id: all, url: "https://r.example/1", enabled: true, resourceTypes: [Resource, Project] }
    - { id: summer, url: "https://r.example/2", enabled: true, filters: [ { filterKind: keywords, condition: ANY, value: [summer] } ] }
    - { id: created, url: "https://r.example/3", enabled: true, eventTypes: [Created, Purged] }
    - { id: children, url: "https://r.example/4", enabled: true, filters: [ { filterKind: parentId, condition: NONE, value: ["null"] }, { filterKind: state, condition: ANY, value: [approved] } ] }
    - { id: off, url: "https://r.example/5", enabled: false }
`,
  'test',
).assetUpdater.webhooks;

it(
  'a 10,000-event run across five webhooks matches a reference computation exactly',
  { timeout: 120_000 },
  async () => {
    await resetData(db.pool);
    const webhooks = routedWebhooks(config);
    await registerWebhooks(db.pool, webhooks);
    // Parents, then children, then a mix of edits (repeated), versions, trash, purges.
    await db.pool
      .query(`insert into assets (asset_id, supertype, state) select g, case when g % 5 = 0 then 'Project' else 'Resource' end,
    case when g % 3 = 0 then 'approved' else 'draft' end from generate_series(1, 1000) g`);
    await db.pool.query(
      `insert into assets (asset_id, parent_id, state) select g, 1 + g % 1000, case when g % 2 = 0 then 'approved' end from generate_series(1001, 2000) g`,
    );
    await db.pool.query(
      `insert into asset_keywords (asset_id, value) select g, 'summer' from generate_series(1, 2000, 4) g`,
    );
    for (let round = 0; round < 7; round += 1)
      await db.pool.query(`update assets set title = 'r${round}' where asset_id % 2 = ${round % 2}`);
    await db.pool.query('update assets set latest_atom_id = asset_id + 10 where asset_id % 7 = 0');
    await db.pool.query('update assets set trashed_at = now() where asset_id % 11 = 0');
    await db.pool.query('delete from assets where asset_id > 1900');
    const { rows: captured } = await db.pool.query<{
      event_id: string;
      event_type: EventType;
      asset_id: number;
      seq: number;
    }>('select event_id, event_type, asset_id, seq from asset_webhooks.waiting_events order by seq');
    expect(captured.length).toBeGreaterThanOrEqual(10_000);

    // The reference: collapse by hand, then the plain evaluation of every check.
    const lastEdit = new Map<number, string>();
    for (const event of captured) if (event.event_type === 'EDITED') lastEdit.set(event.asset_id, event.event_id);
    const states = new Map<number, AssetState | null>();
    for (const id of new Set(captured.map((e) => e.asset_id)))
      states.set(id, await readAssetState(db.pool, String(id)));
    const { rows: inTrash } = await db.pool.query<{ asset_id: number }>(
      'select asset_id from assets where trashed_at is not null',
    );
    const trashed = new Set(inTrash.map((row) => Number(row.asset_id)));
    const expected: Record<string, Record<string, number>> = {};
    for (const event of captured) {
      for (const webhook of config) {
        const state = states.get(event.asset_id) ?? null;
        let outcome: string;
        if (event.event_type === 'EDITED' && lastEdit.get(event.asset_id) !== event.event_id) outcome = 'collapsed';
        else if (!webhook.enabled) outcome = 'excluded:disabled';
        else if (event.event_type === 'PURGED') outcome = 'pending';
        else if (state === null) outcome = 'excluded:asset_gone';
        // Edits and versions made before the move to the Trash: the asset is in the Trash when coalesced.
        else if (['EDITED', 'REVERSION'].includes(event.event_type) && trashed.has(event.asset_id))
          outcome = 'excluded:in_trash';
        else {
          const excludedBy = explainWebhook(webhook, event.event_type, state).excludedBy;
          outcome = excludedBy === null ? 'pending' : `excluded:${excludedBy}`;
        }
        (expected[webhook.id] ??= {})[outcome] = (expected[webhook.id]![outcome] ?? 0) + 1;
      }
    }

    await runCoalesce(db.pool, webhooks, { chunkSize: 3000 });
    const { rows } = await db.pool.query<{ webhook_id: string; outcome: string; n: number }>(`
    select webhook_id, case when outcome = 'excluded' then 'excluded:' || excluded_by else outcome end as outcome, count(*)::int as n
    from asset_webhooks.event_outcomes group by 1, 2`);
    const actual: Record<string, Record<string, number>> = {};
    for (const row of rows) (actual[row.webhook_id] ??= {})[row.outcome] = row.n;
    expect(actual).toEqual(expected);
    // Every event carried to a webhook is in exactly one of its payloads.
    const { rows: carried } = await db.pool.query<{ webhook_id: string; n: number; distinct_ids: number }>(`
    select webhook_id, count(*)::int as n, count(distinct e)::int as distinct_ids from asset_webhooks.payloads, unnest(event_ids) e group by webhook_id`);
    for (const row of carried) {
      expect(row.n).toBe(row.distinct_ids);
      expect(row.n).toBe(expected[row.webhook_id]!.pending);
    }
  },
);
