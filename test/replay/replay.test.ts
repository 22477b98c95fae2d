import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type ReceivedRequest, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const KEY = `whsec_${randomBytes(32).toString('base64')}`;
/** Assets created before the window's end, and after it. */
const IN_WINDOW = 30;
const AFTER = 5;

const receivers: Record<'crm' | 'archive' | 'mirror', TestReceiver | undefined> = {
  crm: undefined,
  archive: undefined,
  mirror: undefined,
};
let service: TestService;
let from: string;
let to: string;
/** The first delivery of each payload to crm, by the eventId it carries (batchSize 1). */
let first: Map<string, ReceivedRequest>;

const replay = (...args: string[]) => runCli(['replay', ...args, '--database-url', db.url]);
const receiver = (id: keyof typeof receivers): TestReceiver => receivers[id]!;
const eventIdOf = (request: ReceivedRequest): string =>
  (JSON.parse(request.body) as { events: Array<{ eventId: string }> }).events[0]!.eventId;

async function dbNow(): Promise<string> {
  const { rows } = await db.pool.query<{ now: Date }>('select clock_timestamp() as now');
  return rows[0]!.now.toISOString();
}

/** Every payload's state, to compare before and after what must change nothing. */
async function states(): Promise<unknown[]> {
  const { rows } = await db.pool.query(
    'select payload_id, webhook_id, status, series, delivered_at from asset_webhooks.payloads order by payload_id',
  );
  return rows;
}

beforeAll(async () => {
  await resetData(db.pool);
  for (const id of ['crm', 'archive', 'mirror'] as const) receivers[id] = await startTestReceiver();
  vi.stubEnv('ASSET_WEBHOOKS_SECRET_CRM_SIGNING', KEY);
  service = await startTestService(
    db.url,
    receiverConfig([
      { id: 'crm', url: receiver('crm').url, batchSize: 1, concurrency: 1, signing: { secret: 'crm-signing' } },
      { id: 'archive', url: receiver('archive').url, batchSize: 1, concurrency: 1 },
      { id: 'mirror', url: receiver('mirror').url, batchSize: 1, concurrency: 1, mirror: true },
    ]),
  );
  from = await dbNow();
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, $1::int) g', [IN_WINDOW]);
  await receiver('crm').waitFor(IN_WINDOW, 60_000);
  to = await dbNow();
  await db.pool.query('insert into assets (asset_id) select g from generate_series($1::int, $2::int) g', [
    IN_WINDOW + 1,
    IN_WINDOW + AFTER,
  ]);
  await receiver('crm').waitFor(IN_WINDOW + AFTER, 60_000);
  await receiver('archive').waitFor(IN_WINDOW + AFTER, 60_000);
  await receiver('mirror').waitFor(IN_WINDOW + AFTER, 60_000);
  await eventually(async () => {
    const { rows } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from asset_webhooks.payloads where status <> 'delivered'",
    );
    return rows[0]!.n === 0 ? true : undefined;
  });
  first = new Map(receiver('crm').requests.map((request) => [eventIdOf(request), request]));
}, 120_000);

afterAll(async () => {
  await service?.stop();
  for (const id of ['crm', 'archive', 'mirror'] as const) await receivers[id]?.close();
  vi.unstubAllEnvs();
});

describe('replay', () => {
  it('with --dry-run counts the window, narrowed by --asset and --event-type, and changes nothing', async () => {
    const before = await states();
    const count = async (...args: string[]) => {
      const result = await replay('--webhook', 'crm', '--from', from, '--to', to, '--dry-run', '--json', ...args);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      return JSON.parse(result.stdout) as { payloads: number; events: number; dryRun: boolean; replayId: null };
    };
    expect(await count()).toMatchObject({ payloads: IN_WINDOW, events: IN_WINDOW, dryRun: true, replayId: null });
    expect((await count('--asset', '3', '5')).payloads).toBe(2);
    expect((await count('--asset', '3', '--asset', String(IN_WINDOW + 1))).payloads).toBe(1);
    expect((await count('--event-type', 'CREATED')).payloads).toBe(IN_WINDOW);
    expect((await count('--event-type', 'edited', '--event-type', 'PURGED')).payloads).toBe(0);
    expect((await count('--asset', '3', '--event-type', 'DELETED')).payloads).toBe(0);
    const text = await replay('--webhook', 'crm', '--from', from, '--to', to, '--dry-run');
    expect(text.stdout).toBe(
      `dry run of replay of webhook crm: ${IN_WINDOW} payloads (${IN_WINDOW} events) would be sent again; nothing changed\n`,
    );
    expect(await states()).toEqual(before);
    const { rows } = await db.pool.query<{ n: number }>(
      'select (select count(*) from asset_webhooks.replays) + (select count(*) from asset_webhooks.redeliveries) as n',
    );
    expect(Number(rows[0]!.n)).toBe(0);
  });

  it(
    'sends the delivered payloads of the window again, in their original order, with the same bodies and webhook-ids',
    { timeout: 120_000 },
    async () => {
      const sentBefore = receiver('crm').requests.length;
      const result = await replay('--webhook', 'crm', '--from', from, '--to', to, '--json');
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      const summary = JSON.parse(result.stdout) as Record<string, unknown>;
      expect(summary).toMatchObject({
        webhookId: 'crm',
        movedTo: null,
        payloads: IN_WINDOW,
        events: IN_WINDOW,
        status: 'completed',
        resumed: false,
        dryRun: false,
        webhookState: 'enabled',
      });
      await receiver('crm').waitFor(sentBefore + IN_WINDOW, 60_000);
      const replayed = receiver('crm').requests.slice(sentBefore);
      // The first deliveries of the window, in the order they arrived (payload order, concurrency 1).
      const originals = receiver('crm').requests.slice(0, IN_WINDOW);
      expect(replayed.map(eventIdOf)).toEqual(originals.map(eventIdOf));
      for (const again of replayed) {
        const original = first.get(eventIdOf(again))!;
        expect(again.body).toBe(original.body);
        expect(again.headers['webhook-id']).toBe(original.headers['webhook-id']);
        expect(() => new Webhook(KEY).verify(again.body, again.headers as Record<string, string>)).not.toThrow();
      }
      const settled = await eventually(async () => {
        const { rows } = await db.pool.query<{ status: string; series: number; n: number }>(
          `select status, series, count(*)::int as n from asset_webhooks.payloads where webhook_id = 'crm'
           group by status, series order by series`,
        );
        return rows.some((row) => row.status !== 'delivered') ? undefined : rows;
      });
      expect(settled).toEqual([
        { status: 'delivered', series: 1, n: AFTER },
        { status: 'delivered', series: 2, n: IN_WINDOW },
      ]);
      const { rows } = await db.pool.query<{ replay_id: string; n: number }>(
        'select replay_id::text, count(*)::int as n from asset_webhooks.redeliveries group by replay_id',
      );
      expect(rows).toEqual([{ replay_id: String(summary.replayId), n: IN_WINDOW }]);
    },
  );

  it('shows each replay in trace and events', async () => {
    const eventId = eventIdOf(receiver('crm').requests[0]!);
    const trace = await runCli(['trace', eventId, '--database-url', db.url]);
    expect(trace.code).toBe(0);
    expect(trace.stdout).toMatch(/crm: in payload \d+ .*delivered at/);
    expect(trace.stdout).toMatch(/replayed as series 2 by replay \d+, requested by .* \(series 1 had been delivered\)/);
    expect(trace.stdout).toMatch(/attempt 1 of series 2 at .*: HTTP 200/);
    const json = JSON.parse((await runCli(['trace', eventId, '--json', '--database-url', db.url])).stdout) as {
      routes: Array<{ webhookId: string; payload: { redeliveries: Array<{ replayId: number | null }> } }>;
    };
    const crm = json.routes.find((route) => route.webhookId === 'crm')!;
    expect(crm.payload.redeliveries).toHaveLength(1);
    expect(crm.payload.redeliveries[0]!.replayId).toEqual(expect.any(Number));
    const events = await runCli(['events', '--from', from, '--to', to, '--webhook', 'crm', '--database-url', db.url]);
    expect(events.code).toBe(0);
    expect(events.stdout.match(/crm: delivered payload \d+, replayed by replay \d+ \(series 2\)/g)).toHaveLength(
      IN_WINDOW,
    );
  });

  it(
    '--to-webhook sends them to another webhook, and refuses UNMATCHED to one that is not a mirror webhook',
    {
      timeout: 120_000,
    },
    async () => {
      // A delivered UNMATCHED of the mirror webhook, in the window.
      const unmatched = JSON.stringify({
        count: 1,
        events: [
          {
            atomId: null,
            eventId: '00000000-0000-4000-8000-000000000001',
            eventTimestamp: from,
            assetId: 2,
            assetUuid: '00000000-0000-4000-8000-000000000002',
            eventType: 'UNMATCHED',
          },
        ],
        webhookTimestamp: from,
      });
      const {
        rows: [carrier],
      } = await db.pool.query<{ payload_id: number }>(
        `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at,
                                            series_started_at, delivered_at)
       values ('mirror', 'delivered', $1, length($1), 1, '{00000000-0000-4000-8000-000000000001}', $2, $2, $2)
       returning payload_id`,
        [unmatched, from],
      );
      const before = await states();
      const refused = await replay('--webhook', 'mirror', '--from', from, '--to', to, '--to-webhook', 'archive');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(
        `--to-webhook: expected a mirror webhook, got archive, which is not one (mirror: false): payload ${carrier!.payload_id} ` +
          'of the window carries UNMATCHED events, which only a mirror webhook receives; narrow the window or the ' +
          '--event-type list to leave it out, or replay to a mirror webhook\n',
      );
      const dry = await replay(
        '--webhook',
        'mirror',
        '--from',
        from,
        '--to',
        to,
        '--to-webhook',
        'archive',
        '--dry-run',
      );
      expect(dry.code).toBe(1);
      expect(await states()).toEqual(before);

      // Without the UNMATCHED, the same move goes through: asset 4's payload of the mirror webhook reaches archive.
      const sentBefore = receiver('archive').requests.length;
      const moved = await replay(
        '--webhook',
        'mirror',
        '--from',
        from,
        '--to',
        to,
        '--to-webhook',
        'archive',
        '--asset',
        '4',
        '--json',
      );
      expect(moved.stderr).toBe('');
      expect(JSON.parse(moved.stdout)).toMatchObject({ payloads: 1, events: 1, movedTo: 'archive' });
      await receiver('archive').waitFor(sentBefore + 1, 60_000);
      const arrived = receiver('archive').requests[sentBefore]!;
      const original = receiver('mirror').requests.find((request) => request.body === arrived.body);
      expect(original).toBeDefined();
      const { rows } = await db.pool.query<{ moved_from: string }>(
        'select moved_from from asset_webhooks.redeliveries where moved_from is not null',
      );
      expect(rows).toEqual([{ moved_from: 'mirror' }]);
    },
  );
});
