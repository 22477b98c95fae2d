import { beforeEach, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { syncWebhooks } from '../../src/service/service-state.js';
import { eventually } from '../helpers/receiver.js';
import { resetData, silentLogger, TEST_PROCESS_ID } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const recorder = { processId: TEST_PROCESS_ID, logger: silentLogger };

const config = (paused: boolean, enabled = true) =>
  parseConfigText(
    `assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://receiver.example/hook", enabled: ${enabled}, paused: ${paused} }\n`,
    'test',
  );

async function state(): Promise<{ paused_since: Date | null; series_started_at: Date }> {
  const { rows } = await db.pool.query<{ paused_since: Date | null; series_started_at: Date }>(
    `select w.paused_since, p.series_started_at from asset_webhooks.webhooks w
     join asset_webhooks.payloads p on p.webhook_id = w.webhook_id where w.webhook_id = 'crm'`,
  );
  return rows[0]!;
}

beforeEach(async () => {
  await resetData(db.pool);
});

/** Several `run` processes record the same configuration: the pause and its resume must count once. */
describe('recording paused across run processes', () => {
  it('keeps the first start of a pause, and shifts the expiry base once when several processes resume at the same time', async () => {
    await syncWebhooks(db.pool, config(false), recorder);
    await db.pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, series_started_at)
       values ('crm', 'pending', '{}', 2, 0, '{}', now() - interval '3 hours')`,
    );
    await syncWebhooks(db.pool, config(true), recorder);
    const paused = await state();
    expect(paused.paused_since).not.toBeNull();
    // A second process (or a restart) with the same configuration keeps when the pause began.
    await syncWebhooks(db.pool, config(true), recorder);
    expect((await state()).paused_since).toEqual(paused.paused_since);
    await db.pool.query("update asset_webhooks.webhooks set paused_since = paused_since - interval '2 hours'");

    // Three processes resume at once: the payload's base moves by the two hours paused, once.
    // A transaction holding the payload's row makes all three wait at the same point, then go on together.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query("select 1 from asset_webhooks.payloads where webhook_id = 'crm' for update");
      const resumes = [1, 2, 3].map(() => syncWebhooks(db.pool, config(false), recorder));
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
          );
          return rows[0]!.n >= 3 ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'three resumes waiting' },
      );
      await holder.query('commit');
      await Promise.all(resumes);
    } finally {
      holder.release();
    }
    const resumed = await state();
    expect(resumed.paused_since).toBeNull();
    const shiftHours = (resumed.series_started_at.getTime() - paused.series_started_at.getTime()) / 3_600_000;
    expect(shiftHours).toBeGreaterThanOrEqual(2);
    expect(shiftHours).toBeLessThan(2.1);
  });

  it("enabled: false wins: a paused webhook that is disabled is resumed (its payloads expire as a disabled webhook's do)", async () => {
    await syncWebhooks(db.pool, config(true), recorder);
    expect(
      (await db.pool.query('select paused_since from asset_webhooks.webhooks')).rows[0].paused_since,
    ).not.toBeNull();
    await syncWebhooks(db.pool, config(true, false), recorder);
    const { rows } = await db.pool.query<{ enabled: boolean; paused_since: Date | null }>(
      'select enabled, paused_since from asset_webhooks.webhooks',
    );
    expect(rows).toEqual([{ enabled: false, paused_since: null }]);
  });
});
