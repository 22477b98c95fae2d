import { pino } from 'pino';
import { beforeEach, expect, it } from 'vitest';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A payload whose body other payloads name (payloads.body_of) is kept by
// retention until they are gone: they send its bytes.

const db = useTestDatabase();
const logger = pino({ level: 'silent' });

beforeEach(async () => {
  await resetData(db.pool);
});

async function remaining(): Promise<number[]> {
  const { rows } = await db.pool.query<{ payload_id: number }>(
    'select payload_id from asset_webhooks.payloads order by payload_id',
  );
  return rows.map((row) => row.payload_id);
}

it('keeps a payload past its retention while another payload names its body, and purges it once that one is gone', async () => {
  const old = "now() - interval '40 days'";
  const {
    rows: [owner],
  } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at, delivered_at)
     values ('crm', 'delivered', '{"count":0}', 11, 0, '{}', ${old}, ${old}) returning payload_id`,
  );
  const {
    rows: [sharer],
  } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, body, body_of, byte_size, event_count, event_ids, created_at)
     values ('shop', 'pending', '', $1, 11, 0, '{}', ${old}) returning payload_id`,
    [owner!.payload_id],
  );
  await runMaintenance({ pool: db.pool, retentionDays: 30, logger });
  expect(await remaining()).toEqual([owner!.payload_id, sharer!.payload_id]);

  await db.pool.query(
    `update asset_webhooks.payloads set status = 'delivered', delivered_at = ${old} where payload_id = $1`,
    [sharer!.payload_id],
  );
  await runMaintenance({ pool: db.pool, retentionDays: 30, logger });
  await runMaintenance({ pool: db.pool, retentionDays: 30, logger });
  expect(await remaining()).toEqual([]);
});
