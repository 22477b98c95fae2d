import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { traceEvent } from '../../src/investigate/trace.js';
import { renderTrace } from '../../src/investigate/trace-render.js';
import { expireWaiting } from '../../src/delivery/recover.js';
import { testDelivery } from '../helpers/delivery.js';
import { receiverConfig, type TestWebhook } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

/** Short enough that a pause outlasts it several times over. */
const DEAD_LETTER_AFTER_SECONDS = 6;

let receiver: TestReceiver;
let running: TestService | undefined;

beforeEach(async () => {
  await resetData(db.pool);
  receiver = await startTestReceiver();
});
afterEach(async () => {
  await running?.stop();
  running = undefined;
  await receiver.close();
});

function config(webhook: Partial<TestWebhook>): string {
  return receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 1, concurrency: 1, ...webhook }], {
    requestTimeoutSeconds: 3,
    retry: { delaysSeconds: [1, 1, 1, 1, 1], deadLetterAfterSeconds: DEAD_LETTER_AFTER_SECONDS },
  });
}

async function reload(webhook: Partial<TestWebhook>): Promise<void> {
  running!.writeConfig(config(webhook));
  expect(await running!.service.reload()).toBe(true);
}

interface PayloadRow {
  payload_id: number;
  status: string;
  created_at: Date;
  series_started_at: Date;
  event_ids: string[];
  body: string;
}

async function payloads(): Promise<PayloadRow[]> {
  const { rows } = await db.pool.query<PayloadRow>(
    `select payload_id::int, status, created_at, series_started_at, event_ids::text[], body
     from asset_webhooks.payloads where webhook_id = 'crm' order by payload_id`,
  );
  return rows;
}

async function pausedSince(): Promise<Date | null> {
  const { rows } = await db.pool.query<{ paused_since: Date | null }>(
    "select paused_since from asset_webhooks.webhooks where webhook_id = 'crm'",
  );
  return rows[0]!.paused_since;
}

/** Adds one asset (a CREATED event) and waits until a coalescing run has put it in a payload of its own. */
async function createAsset(): Promise<void> {
  const before = (await payloads()).length;
  await db.pool.query('insert into assets default values');
  await eventually(async () => ((await payloads()).length > before ? true : undefined), {
    timeoutMs: 20_000,
    what: 'a payload for the new asset',
  });
}

describe('paused: true', () => {
  it('keeps every payload, before and during the pause, unsent and unexpired, then sends them in order on resume', async () => {
    // Until the resume every request hangs until the request timeout: the
    // first payload's attempt is in flight when the pause starts.
    let resumed = false;
    receiver.respond = () => (resumed ? 200 : 'hang');
    running = await startTestService(db.url, config({}));
    // Three payloads (batchSize 1): the first is sent, the other two wait behind it.
    await db.pool.query('insert into assets default values');
    await db.pool.query('insert into assets default values');
    await db.pool.query('insert into assets default values');
    await eventually(async () => ((await payloads()).length === 3 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'three payloads',
    });
    await receiver.waitFor(1);
    await reload({ paused: true });
    const pauseStart = (await pausedSince())!;
    expect(pauseStart).not.toBeNull();
    const beforePause = await payloads();
    expect(beforePause).toHaveLength(3);

    // The attempt in flight finishes (a timeout: a retry), and its retry, due during the pause, waits.
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ open: number; retried: number }>(
          "select count(*) filter (where outcome is null)::int as open, count(*) filter (where outcome = 'retry')::int as retried from asset_webhooks.attempts",
        );
        return rows[0]!.open === 0 && rows[0]!.retried > 0 ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the attempt in flight at the pause finished' },
    );
    const sentBeforePause = receiver.requests.length;

    // Events keep being coalesced into payloads over several runs, edits included.
    await createAsset();
    await db.pool.query("update assets set title = 'edited' where asset_id = 1");
    await eventually(async () => ((await payloads()).length > 4 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'a payload for the edit',
    });
    await createAsset();
    await createAsset();

    // A restart while paused keeps the pause, and when it began.
    await running.stop();
    running = await startTestService(db.url, config({ paused: true }));
    expect(await pausedSince()).toEqual(pauseStart);

    // Paused until every payload is older than the expiry window, and the sweep has run.
    const made = await payloads();
    const newest = Math.max(...made.map((p) => p.created_at.getTime()));
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ now: Date }>('select now()');
        return rows[0]!.now.getTime() > newest + (DEAD_LETTER_AFTER_SECONDS + 1) * 1000 ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'every payload older than deadLetterAfterSeconds' },
    );
    // The expiry sweep every run process makes, with this document's deadLetterAfterSeconds.
    const sweeper = await testDelivery(db.pool, config({ paused: true }));
    try {
      expect(await expireWaiting(sweeper.context)).toBe(0);
    } finally {
      await sweeper.close();
    }
    const waiting = await payloads();
    expect(waiting.map((p) => p.status)).toEqual(made.map(() => 'pending'));
    expect(receiver.requests).toHaveLength(sentBeforePause);
    // Nothing in flight: the retry that fell due during the pause keeps its slot and waits.
    expect(
      await db.pool
        .query('select 1 from asset_webhooks.in_flight where next_attempt_at is null')
        .then((r) => r.rowCount),
    ).toBe(0);

    // trace says why a payload waits.
    const rendered = renderTrace(await traceEvent(db.pool, made.at(-1)!.event_ids[0]!));
    expect(rendered).toContain('waiting: webhook paused since');
    // So does the runbook: paused, and no expiry time while the clock stands still.
    const runbook = fileURLToPath(new URL('../../sql/runbooks/pause-webhook.sql', import.meta.url));
    const { stdout } = await promisify(execFile)('psql', [
      db.url,
      '-X',
      '-v',
      'ON_ERROR_STOP=1',
      '-v',
      'webhook_id=crm',
      '-f',
      runbook,
    ]);
    expect(stdout).toMatch(/crm\s+\|\s+t\s+\|\s+t\s+\|/);
    expect(stdout).toMatch(new RegExp(`${made[0]!.payload_id}\\s+\\|\\s+pending\\s+\\|\\s+1\\s+\\|[^|]+\\|\\s*$`, 'm'));

    resumed = true;
    await reload({ paused: false });
    expect(await pausedSince()).toBeNull();
    // Resumed: the time paused is taken off each payload's window. Payloads that
    // waited before the pause move by the whole pause; those made during it start at the resume.
    const afterResume = await payloads();
    const resumeAt = afterResume.at(-1)!.series_started_at.getTime();
    expect(resumeAt).toBeGreaterThan(afterResume.at(-1)!.created_at.getTime());
    for (const [i, p] of afterResume.entries()) {
      const before = made[i]!.series_started_at.getTime();
      // Within a millisecond: the database keeps microseconds, a Date milliseconds.
      expect(
        Math.abs(p.series_started_at.getTime() - (before + resumeAt - Math.max(before, pauseStart.getTime()))),
      ).toBeLessThanOrEqual(1);
    }
    for (const [i, p] of afterResume.slice(0, 3).entries()) {
      expect(p.series_started_at.getTime() - beforePause[i]!.series_started_at.getTime()).toBeGreaterThan(
        DEAD_LETTER_AFTER_SECONDS * 1000,
      );
    }

    await eventually(async () => ((await payloads()).every((p) => p.status === 'delivered') ? true : undefined), {
      timeoutMs: 30_000,
      what: 'every payload delivered',
    });
    // After the requests of before the pause: each payload once, in payload order, so every event in order of occurrence.
    const sent = receiver.requests.slice(sentBeforePause);
    expect(sent.map((request) => request.body)).toEqual(made.map((p) => p.body));
    const events = sent.flatMap(
      (request) => (JSON.parse(request.body) as { events: Array<{ eventId: string; eventTimestamp: string }> }).events,
    );
    const { rows: occurred } = await db.pool.query<{ event_id: string }>(
      "select event_id::text from asset_webhooks.event_outcomes where webhook_id = 'crm' and payload_id is not null order by occurred_at, payload_id",
    );
    expect(events.map((event) => event.eventId)).toEqual(occurred.map((row) => row.event_id));
    expect(events.length).toBe(made.length);
    const { rows: dead } = await db.pool.query("select 1 from asset_webhooks.payloads where status = 'dead_lettered'");
    expect(dead).toHaveLength(0);
  });

  it('enabled: false wins over paused: the webhook is not paused and its events are dropped, as for a disabled webhook', async () => {
    running = await startTestService(db.url, config({ enabled: false, paused: true }));
    expect(await pausedSince()).toBeNull();
    await db.pool.query('insert into assets default values');
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ excluded_by: string }>(
          "select excluded_by from asset_webhooks.event_outcomes where webhook_id = 'crm'",
        );
        return rows[0]?.excluded_by;
      },
      { timeoutMs: 20_000, what: 'the event routed' },
    ).then((excludedBy) => expect(excludedBy).toBe('disabled'));

    await reload({});
    await db.pool.query('insert into assets default values');
    await receiver.waitFor(1);
    const { rows } = await db.pool.query<{ asset_id: string }>('select asset_id::text from assets order by asset_id');
    const body = JSON.parse(receiver.requests[0]!.body) as { events: Array<{ assetId: number }> };
    // Only the event of the enabled time; the one of the disabled time is never sent.
    expect(body.events.map((event) => String(event.assetId))).toEqual([rows[1]!.asset_id]);
    expect(await payloads()).toHaveLength(1);
  });
});
