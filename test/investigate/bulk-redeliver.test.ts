import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { openWebhook, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const DEAD = 1000;
// Dead letter i (0-based, in payload order) was dead-lettered at BASE + i minutes, as `expired` when i % 10 = 0, else as `rejected`.
const BASE = Date.parse('2026-11-20T00:00:00Z');
const at = (minutes: number): string => new Date(BASE + minutes * 60_000).toISOString();
let receiver: TestReceiver;
let service: TestService;
let payloadIds: number[];
/** The eventId each payload carries (batchSize 1), to map a request back to its payload. */
let payloadOfEvent: Map<string, number>;

async function states(): Promise<Map<number, { status: string; series: number }>> {
  const { rows } = await db.pool.query<{ payload_id: number; status: string; series: number }>(
    "select payload_id, status, series from asset_webhooks.payloads where webhook_id = 'crm'",
  );
  return new Map(rows.map((row) => [row.payload_id, { status: row.status, series: row.series }]));
}

/** The payload ids the receiver got, in order of arrival. */
function received(from = 0): number[] {
  return receiver.requests.slice(from).map((request) => {
    const body = JSON.parse(request.body) as { events: Array<{ eventId: string }> };
    return payloadOfEvent.get(body.events[0]!.eventId)!;
  });
}

const redeliver = (...args: string[]) => runCli(['dead-letters', 'redeliver', ...args, '--database-url', db.url]);

beforeAll(async () => {
  await resetData(db.pool);
  receiver = await startTestReceiver();
  const crm = openWebhook('crm', { batchSize: 1 });
  await registerWebhooks(db.pool, [crm]);
  await db.pool.query('insert into assets (asset_id) select g from generate_series(1, $1::int) g', [DEAD]);
  await runCoalesce(db.pool, [crm]);
  const { rows } = await db.pool.query<{ payload_id: number; event_id: string }>(
    "select payload_id, event_ids[1]::text as event_id from asset_webhooks.payloads where webhook_id = 'crm' order by payload_id",
  );
  expect(rows).toHaveLength(DEAD);
  payloadIds = rows.map((row) => row.payload_id);
  payloadOfEvent = new Map(rows.map((row) => [row.event_id, row.payload_id]));
  // What delivery leaves after a receiver answered 400 (settle_attempts): an attempt and a dead letter.
  await db.pool.query(
    `with numbered as (select payload_id, row_number() over (order by payload_id) - 1 as i from asset_webhooks.payloads where webhook_id = 'crm')
     update asset_webhooks.payloads p
     set status = 'dead_lettered', attempts = 1, last_status_code = 400, last_attempt_at = $1::timestamptz + n.i * interval '1 minute',
         dead_letter_reason = case when n.i % 10 = 0 then 'expired' else 'rejected' end,
         dead_lettered_at = $1::timestamptz + n.i * interval '1 minute'
     from numbered n where p.payload_id = n.payload_id`,
    [at(0)],
  );
  await db.pool.query(
    `insert into asset_webhooks.attempt_log (payload_id, series, attempt_no, started_at, duration_ms, status_code, outcome)
     select payload_id, 1, 1, last_attempt_at, 3, 400, 'rejected' from asset_webhooks.payloads where webhook_id = 'crm'`,
  );
  await db.pool.query('delete from graphile_worker._private_jobs');
  // The receiver accepts now; the service (concurrency 1) sends what is redelivered.
  service = await startTestService(
    db.url,
    receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 1, concurrency: 1 }]),
  );
}, 120_000);

afterAll(async () => {
  await service?.stop();
  await receiver?.close();
});

describe('dead-letters redeliver --webhook', () => {
  it(
    'with --dry-run counts the matching dead letters, by window and reason, and changes nothing',
    { timeout: 120_000 },
    async () => {
      const before = await states();
      const all = await redeliver('--webhook', 'crm', '--dry-run', '--json');
      expect(all.code).toBe(0);
      expect(JSON.parse(all.stdout)).toMatchObject({
        webhookId: 'crm',
        count: DEAD,
        dryRun: true,
        firstPayloadId: payloadIds[0],
        lastPayloadId: payloadIds[DEAD - 1],
      });
      const text = await redeliver('--webhook', 'crm', '--dry-run');
      expect(text.stdout).toBe(
        `${DEAD} dead letters of webhook crm would be queued for redelivery (payloads ${payloadIds[0]} to ${payloadIds[DEAD - 1]}); dry run, nothing changed\n`,
      );
      const count = async (...args: string[]): Promise<number> =>
        (JSON.parse((await redeliver('--webhook', 'crm', '--dry-run', '--json', ...args)).stdout) as { count: number })
          .count;
      const counts = await Promise.all([
        count('--reason', 'expired'),
        count('--reason', 'rejected'),
        count('--reason', 'retries_exhausted'),
        // [from, to): minutes 100 to 199, with and without an offset.
        count('--from', at(100), '--to', at(200)),
        count('--from', at(100).slice(0, -1), '--to', at(200).replace('Z', '+00:00')),
        count('--from', at(990)),
        count('--to', at(10)),
        count('--from', at(100), '--to', at(200), '--reason', 'expired'),
      ]);
      expect(counts).toEqual([100, 900, 0, 100, 100, 10, 10, 10]);
      expect(await states()).toEqual(before);
      const {
        rows: [recorded],
      } = await db.pool.query<{ n: number }>('select count(*)::int as n from asset_webhooks.redeliveries');
      expect(recorded!.n).toBe(0);
      expect(receiver.requests).toHaveLength(0);
    },
  );

  it(
    'redelivers only the dead letters of the reason and window, each recorded as a single redelivery is, in payload order',
    { timeout: 120_000 },
    async () => {
      const result = await redeliver('--webhook', 'crm', '--reason', 'expired', '--from', at(0), '--to', at(500));
      expect(result.code).toBe(0);
      const chosen = payloadIds.filter((_, i) => i % 10 === 0 && i < 500);
      expect(result.stdout).toBe(
        `50 dead letters of webhook crm queued for redelivery (payloads ${chosen[0]} to ${chosen[49]}), sent in payload order; a running service sends them\n`,
      );
      await receiver.waitFor(50, 60_000);
      expect(received()).toEqual(chosen);
      const { rows } = await db.pool.query<{
        payload_id: number;
        series: number;
        previous_reason: string;
        requested_by: string;
      }>(
        'select payload_id, series, previous_reason, requested_by from asset_webhooks.redeliveries order by payload_id',
      );
      expect(rows.map((row) => [row.payload_id, row.series, row.previous_reason])).toEqual(
        chosen.map((id) => [id, 2, 'expired']),
      );
      expect(rows.every((row) => row.requested_by.includes('@'))).toBe(true);
      const after = await eventually(
        async () => {
          const now = await states();
          return chosen.every((id) => now.get(id)!.status === 'delivered') ? now : undefined;
        },
        { timeoutMs: 30_000, what: 'the 50 redelivered payloads delivered' },
      );
      expect([...after.entries()].filter(([, s]) => s.status === 'dead_lettered')).toHaveLength(DEAD - 50);
    },
  );

  it(
    "redelivers the rest of a webhook's dead letters, a thousand at once, all delivered in payload order",
    { timeout: 180_000 },
    async () => {
      const result = await redeliver('--webhook', 'crm', '--json');
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ count: DEAD - 50, dryRun: false, webhookState: 'enabled' });
      await receiver.waitFor(DEAD, 150_000);
      const rest = payloadIds.filter((_, i) => !(i % 10 === 0 && i < 500));
      expect(received(50)).toEqual(rest);
      const final = await eventually(
        async () => {
          const now = await states();
          return [...now.values()].every((s) => s.status === 'delivered') ? now : undefined;
        },
        { timeoutMs: 30_000, what: 'every payload delivered' },
      );
      expect([...final.values()].every((s) => s.series === 2)).toBe(true);
      const {
        rows: [recorded],
      } = await db.pool.query<{ n: number; payloads: number }>(
        'select count(*)::int as n, count(distinct payload_id)::int as payloads from asset_webhooks.redeliveries',
      );
      expect(recorded).toEqual({ n: DEAD, payloads: DEAD });
      // Nothing left to redeliver.
      expect((await redeliver('--webhook', 'crm')).stdout).toMatch(
        /^0 dead letters of webhook crm queued for redelivery, /,
      );
      expect(receiver.requests).toHaveLength(DEAD);
    },
  );

  it(
    'tells the two forms apart by their arguments, and refuses a mixture as bad usage (exit 2) in one line',
    { timeout: 120_000 },
    async () => {
      const cases: Array<[string[], string]> = [
        [
          [],
          'PAYLOAD_ID: expected PAYLOAD_ID (one payload) or --webhook ID (every dead letter of a webhook), got neither',
        ],
        [
          ['5', '--webhook', 'crm'],
          'PAYLOAD_ID: expected either PAYLOAD_ID (one payload) or --webhook ID (every dead letter of a webhook), got both (5 and --webhook crm)',
        ],
        [
          ['5', '--from', at(0)],
          '--from: goes with --webhook ID (every dead letter of a webhook), not with PAYLOAD_ID 5',
        ],
        [
          ['5', '--reason', 'rejected'],
          '--reason: goes with --webhook ID (every dead letter of a webhook), not with PAYLOAD_ID 5',
        ],
        [
          ['5', '--dry-run'],
          '--dry-run: goes with --webhook ID (every dead letter of a webhook), not with PAYLOAD_ID 5',
        ],
        [
          ['--webhook', 'crm', '--to', 'crm-v2'],
          '--to: expected an ISO-8601 time such as 2026-11-22T09:00:00Z (UTC when no offset is given), got "crm-v2" ' +
            '(with --webhook, --to ends the time window; to move the dead letters to another webhook: --to-webhook WEBHOOK_ID)',
        ],
        [
          ['5', '--to', 'crm-v2', '--to-webhook', 'crm-v3'],
          '--to-webhook: expected either --to WEBHOOK_ID or --to-webhook WEBHOOK_ID with PAYLOAD_ID 5, got both',
        ],
        [
          ['--webhook', 'crm', '--from', at(10), '--to', at(5)],
          `--from: expected a time before --to (${at(5)}), got ${at(10)}`,
        ],
        [
          ['--webhook', 'crm', '--reason', 'gone'],
          '--reason: expected one of rejected, retries_exhausted, expired, too_large, webhook_removed, got "gone"',
        ],
      ];
      const results = await Promise.all(cases.map(([args]) => redeliver(...args)));
      cases.forEach(([args, message], index) => {
        const result = results[index]!;
        // Bad usage: one line, the hint on it.
        expect({ args, code: result.code, stderr: result.stderr }).toEqual({
          args,
          code: 2,
          stderr: `error: ${message} (run with --help for usage)\n`,
        });
      });
      const unknown = await redeliver('--webhook', 'nosuch');
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toBe(
        '--webhook: expected the id of a webhook the service has run with (crm), got "nosuch"\n',
      );
    },
  );
});
