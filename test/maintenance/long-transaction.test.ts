import { PassThrough } from 'node:stream';
import { expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { createLogger } from '../../src/logging/logger.js';
import { runMaintenance } from '../../src/maintenance/maintenance.js';
import { oldestTransactionAge } from '../../src/db/long-transactions.js';
import { ClockPools } from '../helpers/db-clock.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

function logLines(sink: PassThrough): Array<{ msg: string; ageSeconds?: number; applicationName?: string }> {
  const text = String(sink.read() ?? '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { msg: string; ageSeconds?: number; applicationName?: string });
}

it('names a long open transaction while payloads wait, and only then', async () => {
  // The transaction is made old by running the clock of the sessions that read its age ahead.
  const clocks = new ClockPools(db.url);
  const later = clocks.ahead(1_200);
  const maintain = async (sink: PassThrough): Promise<void> => {
    await runMaintenance({
      pool: later,
      retentionDays: 30,
      logger: createLogger({ destination: sink }),
      longTransactionSeconds: 1,
    });
  };
  const other = createPool(db.url, { max: 1, applicationName: 'nightly report' });
  const client = await other.connect();
  try {
    expect(await oldestTransactionAge(db.pool)).toBeNull();
    await client.query('begin isolation level repeatable read');
    await client.query('select count(*) from asset_webhooks.webhooks');
    const oldest = await oldestTransactionAge(later);
    expect(oldest?.seconds).toBeGreaterThanOrEqual(1);
    expect(oldest?.applicationName).toBe('nightly report');

    // Nothing waits: a long transaction costs delivery nothing, so nothing is said.
    const quiet = new PassThrough();
    await maintain(quiet);
    expect(logLines(quiet).filter((line) => line.msg.startsWith('a long open transaction'))).toEqual([]);

    await db.pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
       values ('crm', 'pending', '{}', 2, 0, '{}')`,
    );
    const warned = new PassThrough();
    await maintain(warned);
    const warning = logLines(warned).find((line) => line.msg.startsWith('a long open transaction'));
    expect(warning?.applicationName).toBe('nightly report');
    expect(warning?.ageSeconds).toBeGreaterThanOrEqual(1);

    await client.query('commit');
    expect(await oldestTransactionAge(db.pool)).toBeNull();
  } finally {
    client.release();
    await other.end();
    await clocks.close();
  }
});
