import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tick } from '../../src/coalesce/schedule.js';
import { payloadStatement, type PayloadRow } from '../../src/lifecycle/payload-rows.js';
import { resumeWebhooks } from '../../src/lifecycle/transitions.js';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { ClockPools } from '../helpers/db-clock.js';
import { insertPayloads } from '../helpers/delivery.js';
import { resetData, silentLogger } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Every time that decides a payload's or a webhook's fate is the one clock's,
// asset_webhooks.now() (docs/payload-lifecycle.md). Each test stops that clock
// at an instant of its own through the sessions that make the decision, and
// finds that instant, not the server's time, in what they wrote.

const db = useTestDatabase();
let clocks: ClockPools;

const T = new Date('2031-05-04T10:00:00.250Z');
const later = (ms: number): Date => new Date(T.getTime() + ms);

beforeEach(async () => {
  await resetData(db.pool);
  await db.pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
     values ('crm', 'http://127.0.0.1/crm', true, 1)`,
  );
  clocks = new ClockPools(db.url);
});
afterEach(async () => {
  await clocks.close();
});

async function timesOf(payloadId: number): Promise<Record<string, Date | null>> {
  const { rows } = await db.pool.query<Record<string, Date | null>>(
    `select created_at, series_started_at, dead_lettered_at, delivered_at
     from asset_webhooks.payloads where payload_id = $1`,
    [payloadId],
  );
  return rows[0]!;
}

function row(payloadId: number, overrides: Partial<PayloadRow> = {}): PayloadRow {
  return {
    payloadId,
    webhookId: 'crm',
    status: 'pending',
    body: '{"events":[]}',
    bodyOf: null,
    byteSize: 13,
    eventCount: 0,
    eventIds: '{}',
    tooLarge: false,
    ...overrides,
  };
}

describe('the one clock', () => {
  it("writes a payload's creation, its series' start and a too_large dead letter at the clock's instant", async () => {
    const { text, values } = payloadStatement(null, [
      row(900_001),
      row(900_002, { status: 'open', body: '' }),
      row(900_003, { status: 'dead_lettered', tooLarge: true }),
    ]);
    await clocks.at(T).query(text, values);
    expect(await timesOf(900_001)).toEqual({
      created_at: T,
      series_started_at: T,
      dead_lettered_at: null,
      delivered_at: null,
    });
    expect((await timesOf(900_002)).created_at).toEqual(T);
    expect(await timesOf(900_003)).toEqual({
      created_at: T,
      series_started_at: T,
      dead_lettered_at: T,
      delivered_at: null,
    });
  });

  it('moves a resumed webhook’s windows by the time paused on the clock, not the server’s', async () => {
    await db.pool.query("update asset_webhooks.webhooks set paused_since = $1 where webhook_id = 'crm'", [T]);
    // One payload waited 10 s before the pause; one was created half an hour into it.
    const [before] = await insertPayloads(db.pool, 'crm', 1, later(-10_000));
    const [during] = await insertPayloads(db.pool, 'crm', 1, later(30 * 60_000));
    const resumedAt = later(60 * 60_000);
    expect(await resumeWebhooks(clocks.at(resumedAt), [])).toEqual(['crm']);
    expect((await timesOf(before!)).series_started_at).toEqual(new Date(resumedAt.getTime() - 10_000));
    expect((await timesOf(during!)).series_started_at).toEqual(resumedAt);
    const { rows } = await db.pool.query("select paused_since from asset_webhooks.webhooks where webhook_id = 'crm'");
    expect(rows).toEqual([{ paused_since: null }]);
  });

  it("counts a gone process's grace on the clock before its webhooks' payloads are dead-lettered", async () => {
    await db.pool.query(
      `insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
       values ('old', 'http://127.0.0.1/old', true, 1)`,
    );
    // A process that left no lease: gone the moment a recording looks.
    await db.pool.query(
      "insert into asset_webhooks.process_configurations (process_id, webhook_ids) values ('gone', '{old}')",
    );
    const [waiting] = await insertPayloads(db.pool, 'old', 1);
    const record = async (at: Date): Promise<unknown[]> =>
      (await clocks.at(at).query("select * from asset_webhooks.record_configuration('live', '{crm}', 10)")).rows;
    expect(await record(T)).toEqual([]);
    const { rows: free } = await db.pool.query(
      "select lease_free_since from asset_webhooks.process_configurations where process_id = 'gone'",
    );
    expect(free).toEqual([{ lease_free_since: T }]);
    expect(await record(later(9_999))).toEqual([]);
    expect(await record(later(10_000))).toEqual([{ webhook_id: 'old', dead_lettered: 1 }]);
    expect((await timesOf(waiting!)).dead_lettered_at).toEqual(later(10_000));
  });

  it('purges a finished payload once the clock is past its retention', async () => {
    const [done] = await insertPayloads(db.pool, 'crm', 1);
    await db.pool.query(
      "update asset_webhooks.payloads set status = 'delivered', delivered_at = created_at where payload_id = $1",
      [done],
    );
    const maintain = (pool: typeof db.pool) => runMaintenance({ pool, retentionDays: 30, logger: silentLogger });
    expect((await maintain(clocks.ahead(29 * 86_400_000))).deleted).toEqual({});
    expect((await maintain(clocks.ahead(31 * 86_400_000))).deleted).toMatchObject({ payloads: 1 });
  });

  it("cuts the coalescing schedule's slots by the clock", async () => {
    await db.pool.query('truncate asset_webhooks.ticks');
    expect(await tick(clocks.at(T), 60)).toBe(true);
    expect(await tick(clocks.at(later(59_000)), 60)).toBe(false);
    expect(await tick(clocks.at(later(60_000)), 60)).toBe(true);
    const { rows } = await db.pool.query('select slot::text, created_at from asset_webhooks.ticks order by slot');
    const slot = Math.floor(T.getTime() / 60_000);
    expect(rows).toEqual([
      { slot: String(slot), created_at: T },
      { slot: String(slot + 1), created_at: later(60_000) },
    ]);
  });
});
