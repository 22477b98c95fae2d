import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';
import { SeenValues } from '../../src/coalesce/seen.js';
import { NOTHING_SEEN } from '../../src/payloads/seen-row.js';
import { readAssetState } from '../../src/db/asset-state.js';
import { referenceEvaluate } from '../../src/filters/reference.js';
import { EVENT_TYPES, type AssetState, type EventType, type ExclusionCheck } from '../../src/interfaces.js';
import { assetArb, webhookArb } from '../helpers/filter-arbitraries.js';
import { outcomes, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

/** The coalescer's verdict for one webhook, as event_outcomes must name it (collapsing aside). */
function expected(webhook: RoutedWebhook, eventType: EventType, asset: AssetState | null): ExclusionCheck | null {
  if (!webhook.enabled) return 'disabled';
  if (eventType === 'PURGED') return null;
  if (asset === null) return 'asset_gone';
  return referenceEvaluate(webhook, eventType, asset);
}

const routedArb = fc
  .array(webhookArb, { minLength: 1, maxLength: 6 })
  .map((webhooks) => webhooks.map((webhook, i): RoutedWebhook => ({ ...webhook, id: `w${i}` })));

describe('asset_webhooks.excluding_check', () => {
  it('names the check the TypeScript evaluation names, from the values SeenValues stores', async () => {
    await fc.assert(
      fc.asyncProperty(
        routedArb,
        fc.array(fc.tuple(fc.option(assetArb, { nil: null }), fc.constantFrom(...EVENT_TYPES)), {
          minLength: 1,
          maxLength: 20,
        }),
        async (webhooks, events) => {
          const seen = new SeenValues(webhooks);
          const definitions: string[] = [];
          const rows: string[] = [];
          const wanted: Array<ExclusionCheck | null> = [];
          for (const [asset, eventType] of events) {
            for (const webhook of webhooks) {
              definitions.push(
                JSON.stringify({
                  enabled: webhook.enabled,
                  resourceTypes: webhook.resourceTypes,
                  eventTypes: webhook.eventTypes,
                  filters: webhook.filters,
                }),
              );
              rows.push(
                JSON.stringify({ ...(eventType === 'PURGED' ? NOTHING_SEEN : seen.of(asset)), event_type: eventType }),
              );
              wanted.push(expected(webhook, eventType, asset));
            }
          }
          const { rows: got } = await db.pool.query<{ check: string | null }>(
            `select asset_webhooks.excluding_check(d, jsonb_populate_record(null::asset_webhooks.events, e)) as check
           from unnest($1::jsonb[], $2::jsonb[]) with ordinality as c(d, e, i) order by i`,
            [definitions, rows],
          );
          expect(got.map((row) => row.check)).toEqual(wanted);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('event_outcomes after coalescing', () => {
  beforeEach(() => resetData(db.pool));

  const dbAssetArb = fc.record({
    supertype: fc.constantFrom('Resource', 'Project', 'Template'),
    child: fc.boolean(),
    state: fc.option(fc.constantFrom('a', 'b', ''), { nil: null }),
    schemaId: fc.option(fc.constantFrom(0, 1, 12), { nil: null }),
    typeId: fc.option(fc.constantFrom(0, 1, 12), { nil: null }),
    domainId: fc.option(fc.constantFrom(0, 1, 12), { nil: null }),
    keywords: fc.uniqueArray(fc.constantFrom('a', 'b', 'c', '1', 'null'), { maxLength: 3 }),
    fields: fc.uniqueArray(fc.tuple(fc.constantFrom('campaign', 'region'), fc.constantFrom('a', 'b', '12')), {
      maxLength: 3,
      selector: ([n, v]) => `${n}=${v}`,
    }),
    gone: fc.boolean(),
  });

  it('names for every event and webhook the check the reference evaluation names against what the run saw', async () => {
    await fc.assert(
      fc.asyncProperty(routedArb, fc.array(dbAssetArb, { minLength: 1, maxLength: 5 }), async (webhooks, assets) => {
        await resetData(db.pool);
        await db.pool.query('delete from asset_webhooks.webhooks');
        await registerWebhooks(db.pool, webhooks);
        // Asset 1 is every child's parent and stays.
        await db.pool.query('insert into assets (asset_id) values (1)');
        for (const [i, a] of assets.entries()) {
          const id = i + 2;
          await db.pool.query(
            `insert into assets (asset_id, supertype, parent_id, state, schema_id, type_id, domain_id) values ($1, $2, $3, $4, $5, $6, $7)`,
            [id, a.supertype, a.child ? 1 : null, a.state, a.schemaId, a.typeId, a.domainId],
          );
          for (const keyword of a.keywords)
            await db.pool.query('insert into asset_keywords (asset_id, value) values ($1, $2)', [id, keyword]);
          for (const [name, value] of a.fields)
            await db.pool.query('insert into asset_additional_fields (asset_id, name, value) values ($1, $2, $3)', [
              id,
              name,
              value,
            ]);
        }
        // What routing sees: the assets as they are when the run reads them.
        const states = new Map<number, AssetState | null>();
        for (let id = 1; id <= assets.length + 1; id += 1) states.set(id, await readAssetState(db.pool, String(id)));
        const first = (await runCoalesce(db.pool, webhooks)).runId;
        const seenFirst = new Map(states);
        // Gone by the next run: its events there are asset_gone, its PURGED passes.
        for (const [i, a] of assets.entries()) {
          if (!a.gone) continue;
          await db.pool.query("update assets set title = 'x' where asset_id = $1", [i + 2]);
          await db.pool.query('delete from assets where asset_id = $1', [i + 2]);
          states.set(i + 2, null);
        }
        await runCoalesce(db.pool, webhooks);

        const { rows: events } = await db.pool.query<{
          event_id: string;
          event_type: EventType;
          asset_id: number;
          collapsed_into: string | null;
          run_id: number;
        }>('select event_id, event_type, asset_id, collapsed_into, run_id from asset_webhooks.events');
        const byEvent = new Map(events.map((e) => [e.event_id, e]));
        const got = await outcomes(db.pool);
        expect(got).toHaveLength(events.length * webhooks.length);
        for (const row of got) {
          const event = byEvent.get(row.event_id)!;
          const webhook = webhooks.find((w) => w.id === row.webhook_id)!;
          const verdict =
            event.collapsed_into !== null
              ? 'collapsed'
              : expected(
                  webhook,
                  event.event_type,
                  (event.run_id === first ? seenFirst : states).get(event.asset_id) ?? null,
                );
          expect([event.event_type, event.asset_id, row.webhook_id, row.outcome, row.excluded_by]).toEqual([
            event.event_type,
            event.asset_id,
            row.webhook_id,
            verdict === 'collapsed' ? 'collapsed' : verdict === null ? 'pending' : 'excluded',
            verdict === null || verdict === 'collapsed' ? null : verdict,
          ]);
          expect(row.payload_id !== null).toBe(verdict === null);
        }
      }),
      { numRuns: 40 },
    );
  });
});
