import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { claimsPass } from '../helpers/pump-metrics.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const crm = openWebhook('crm');
let configPath: string;

const backfillWith = (config: string, ...args: string[]) =>
  runCli(['backfill', '--webhook', 'crm', '--json', '--config', config, '--database-url', db.url, ...args]);
const backfillCli = (...args: string[]) => backfillWith(configPath, ...args);

/** The assets of the backfill's events, ascending. */
async function backfilledAssets(): Promise<number[]> {
  const { rows } = await db.pool.query<{ asset_id: number }>(
    'select asset_id from asset_webhooks.events where backfill_id is not null order by asset_id',
  );
  return rows.map((row) => row.asset_id);
}

/**
 * Per asset, the event types crm's payloads carry, in the order the webhook
 * sends them (payload id, then place in the payload).
 */
async function sentInOrder(): Promise<Map<number, string[]>> {
  const sent = new Map<number, string[]>();
  for (const payload of await payloads(db.pool, 'crm'))
    for (const event of bodyEvents(payload))
      sent.set(event.assetId, [...(sent.get(event.assetId) ?? []), event.eventType]);
  return sent;
}

beforeAll(() => {
  configPath = path.join(tempDirectory('aw-backfill-trash-'), 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      assetUpdater: {
        network: { allowPrivateAddresses: true },
        webhooks: [{ id: 'crm', url: 'http://127.0.0.1:9/hook', enabled: true, batchSize: 2 }],
      },
    }),
  );
});

beforeEach(async () => {
  await resetData(db.pool);
  // Assets 1..6, top-level Resources; 3 is in the Trash. Their events are coalesced before any backfill.
  await db.pool.query('insert into assets (asset_id, latest_atom_id) select g, g * 10 from generate_series(1, 6) g');
  await db.pool.query('update assets set trashed_at = now() where asset_id = 3');
  await registerWebhooks(db.pool, [crm]);
  await runCoalesce(db.pool, [crm]);
});

describe('backfill and the Trash', () => {
  it(
    'sends only assets that are not in the Trash, and counts the others as in_trash',
    { timeout: 120_000 },
    async () => {
      const result = await backfillCli();
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({
        status: 'completed',
        assetsRead: 6,
        eventsSent: 5,
        excluded: 1,
        excludedBy: { in_trash: 1 },
      });
      expect(await backfilledAssets()).toEqual([1, 2, 4, 5, 6]);

      // A listed asset in the Trash is excluded, not missing; restored, it is sent.
      const listed = await backfillCli('--asset', '3');
      expect(JSON.parse(listed.stdout)).toMatchObject({ eventsSent: 0, excludedBy: { in_trash: 1 }, missingCount: 0 });
      await db.pool.query('update assets set trashed_at = null where asset_id = 3');
      const restored = await backfillCli('--asset', '3');
      expect(JSON.parse(restored.stdout)).toMatchObject({ eventsSent: 1, excludedBy: {} });
    },
  );
});

describe('an asset purged or trashed while a backfill runs', () => {
  it(
    'gets no EDITED from the backfill when the change commits between its read and its write',
    { timeout: 120_000 },
    async () => {
      const result = await backfillHeldAtGate({
        meanwhile: async () => {
          // Asset 2 is purged and asset 5 trashed, and a coalescing run sends on both.
          await db.pool.query('delete from assets where asset_id = 2');
          await db.pool.query('update assets set trashed_at = now() where asset_id = 5');
          await runCoalesce(db.pool, [crm]);
        },
      });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({
        status: 'completed',
        assetsRead: 6,
        eventsSent: 3,
        excluded: 3,
        excludedBy: { asset_gone: 1, in_trash: 2 },
      });
      expect(await backfilledAssets()).toEqual([1, 4, 6]);
      // What crm is sent, per asset, in the order it is sent: no EDITED after a PURGED or DELETED.
      expect(Object.fromEntries(await sentInOrder())).toEqual({
        1: ['CREATED', 'EDITED'],
        2: ['CREATED', 'PURGED'],
        3: ['CREATED', 'DELETED'],
        4: ['CREATED', 'EDITED'],
        5: ['CREATED', 'DELETED'],
        6: ['CREATED', 'EDITED'],
      });
    },
  );

  it(
    'leaves them out of a write that carries an open payload to the next, and keeps the totals exact',
    { timeout: 120_000 },
    async () => {
      // 2,500 assets: three writes of full payloads of two events; asset 3 is in the Trash.
      await db.pool.query('insert into assets (asset_id) select g from generate_series(7, 2500) g');
      await runCoalesce(db.pool, [crm]);
      const result = await backfillHeldAtGate({
        // Both are in the first write, which leaves them out, packs again and carries its open payload.
        meanwhile: () => db.pool.query('delete from assets where asset_id in (2, 700)'),
      });
      expect(result.code).toBe(0);
      const totals = { assetsRead: 2500, eventsSent: 2497, excluded: 3, payloads: 1249 };
      expect(JSON.parse(result.stdout)).toMatchObject({
        status: 'completed',
        ...totals,
        excludedBy: { asset_gone: 2, in_trash: 1 },
      });
      const { rows } = await db.pool.query(
        `select assets_read::int as "assetsRead", events_sent::int as "eventsSent", excluded::int as "excluded", payloads::int as "payloads"
         from asset_webhooks.backfills order by backfill_id desc limit 1`,
      );
      expect(rows).toEqual([totals]);
      const sent = await backfilledAssets();
      expect(sent).toHaveLength(2497);
      expect(sent.filter((id) => [2, 3, 700].includes(id))).toEqual([]);
      const backfilled = (await payloads(db.pool, 'crm')).filter((payload) =>
        bodyEvents(payload).every((event) => event.eventType === 'EDITED'),
      );
      expect(backfilled.map((payload) => payload.event_count)).toEqual([...Array(1248).fill(2), 1]);
    },
  );
});

describe('a backfill write in progress', () => {
  it(
    "holds back the sending of a PURGED coalesced meanwhile until the backfill's EDITED of the asset is committed",
    { timeout: 120_000 },
    async () => {
      const receiver = await startTestReceiver();
      const configText = receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 2 }]);
      const config = path.join(tempDirectory('aw-backfill-claim-'), 'config.yaml');
      writeFileSync(config, configText);
      const port = await freePort();
      const service = await startTestService(db.url, configText, { httpPort: port });
      try {
        const delivered = async (): Promise<true | undefined> =>
          (await payloads(db.pool, 'crm')).every((payload) => payload.status === 'delivered') ? true : undefined;
        await eventually(delivered, { timeoutMs: 30_000, what: 'the captured events delivered' });
        const result = await backfillHeldAtGate({
          config,
          // The write's second read of its assets (see backfill), after its payload ids are drawn.
          marker: 'end as check',
          meanwhile: async () => {
            // Purged after the write's read began: its EDITED goes out, and must go first.
            await db.pool.query('delete from assets where asset_id = 2');
            await eventually(
              async () =>
                (await payloads(db.pool, 'crm')).some(
                  // A payload still being written (open) has no body yet.
                  (payload) => payload.body !== '' && bodyEvents(payload).some((event) => event.eventType === 'PURGED'),
                )
                  ? true
                  : undefined,
              { timeoutMs: 30_000, what: 'the PURGED coalesced by the service' },
            );
            // Two claims of the service's pump since (it polls every second): it would have sent the PURGED.
            await claimsPass(port);
          },
        });
        expect(result.code).toBe(0);
        expect(JSON.parse(result.stdout)).toMatchObject({ status: 'completed', eventsSent: 5 });
        await eventually(delivered, { timeoutMs: 30_000, what: 'every payload delivered' });
      } finally {
        await service.stop();
        await receiver.close();
      }
      const received = receiver.requests.flatMap(
        (request) => (JSON.parse(request.body) as { events: Array<{ assetId: number; eventType: string }> }).events,
      );
      expect(received.filter((event) => event.assetId === 2).map((event) => event.eventType)).toEqual([
        'CREATED',
        'EDITED',
        'PURGED',
      ]);
    },
  );
});

/**
 * The binding's view, with a gate that holds the query whose text holds
 * `marker` (by default the backfill's read, the only query that selects
 * `as read_at`) after its snapshot is taken, for as long as the test holds
 * advisory lock 4242. Nothing else waits on it.
 */
async function installGate(marker = 'as read_at'): Promise<void> {
  await db.pool.query(`
        create or replace function public.backfill_gate() returns boolean language plpgsql volatile as $$
        begin
          if strpos(current_query(), '${marker}') > 0 then
            perform pg_advisory_lock_shared(4242);
            perform pg_advisory_unlock_shared(4242);
          end if;
          return true;
        end $$;
        create or replace view asset_webhooks.asset_state as
        select a.asset_id, a.asset_uuid, a.supertype, a.parent_id, a.state, a.schema_id, a.type_id, a.domain_id, a.latest_atom_id,
               coalesce(k.keywords, '{}'::text[]) as keywords,
               coalesce(f.field_names, '{}'::text[]) as field_names,
               coalesce(f.field_values, '{}'::text[]) as field_values,
               a.trashed_at is not null as in_trash
        from public.assets a
        left join lateral (select array_agg(k.value) as keywords from public.asset_keywords k where k.asset_id = a.asset_id) k on true
        left join lateral (select array_agg(f.name) as field_names, array_agg(f.value) as field_values
                           from public.asset_additional_fields f where f.asset_id = a.asset_id) f on true
        where public.backfill_gate();
      `);
}

/**
 * Runs a backfill (on `config`, by default the file's) whose query marked by
 * `marker` (see installGate) is held at the gate while `meanwhile` runs, then
 * let through; resolves with the backfill's result.
 */
async function backfillHeldAtGate({
  config = configPath,
  marker,
  meanwhile,
}: {
  config?: string;
  marker?: string;
  meanwhile: () => Promise<unknown>;
}): Promise<CliResult> {
  await installGate(marker);
  const gate = new pg.Client({ connectionString: db.url });
  await gate.connect();
  try {
    await gate.query('select pg_advisory_lock(4242)');
    const running = backfillWith(config);
    await readWaitingAtGate();
    await meanwhile();
    await gate.query('select pg_advisory_unlock(4242)');
    return await running;
  } finally {
    await gate.end();
  }
}

/** Resolves once the backfill has read its snapshot of the assets and waits at the gate, before its write. */
async function readWaitingAtGate(): Promise<void> {
  await eventually(
    async () => {
      const { rows } = await db.pool.query(
        "select 1 from pg_locks where locktype = 'advisory' and objid = 4242 and not granted",
      );
      return rows.length > 0 ? true : undefined;
    },
    { timeoutMs: 30_000, what: "the backfill's read waiting at the gate" },
  );
}
