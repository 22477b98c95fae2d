import type pg from 'pg';
import type { Logger } from 'pino';
import { oldestTransactionAge } from '../db/long-transactions.js';
import { inTransaction } from '../db/transaction.js';
import { purgePayloads, retentionCutoff } from '../lifecycle/retention.js';

export interface MaintenanceOptions {
  readonly pool: pg.Pool;
  readonly retentionDays: number;
  readonly logger: Logger;
  /** Rows deleted per statement, so no statement holds long locks. Default 5,000. */
  readonly batchSize?: number;
  /** Warn about a transaction open this long while payloads wait. Default 600 s. */
  readonly longTransactionSeconds?: number;
}

export interface MaintenanceResult {
  readonly deleted: Record<string, number>;
}

/**
 * The periodic housekeeping of the service (once a minute):
 *  - consumed events, finished payloads, runs and ticks older than
 *    retentionDays are removed in small batches;
 *  - while payloads wait, a transaction open for longer than
 *    longTransactionSeconds is logged: the dead rows of every delivery stay
 *    until it ends, and delivering a backlog slows down more the longer it is.
 * Expiry and crash recovery are delivery's (src/delivery/recover.ts).
 */
export async function runMaintenance(options: MaintenanceOptions): Promise<MaintenanceResult> {
  const { pool, logger } = options;
  const batchSize = options.batchSize ?? 5000;

  await warnOfLongTransaction(options);

  const deleted: Record<string, number> = {};
  // The one clock's (asset_webhooks.now()), as payloads' own retention.
  const cutoff = retentionCutoff('$1');
  // Each batch walks the index of its time column from the oldest row, so a
  // purge costs what it deletes, not the size of the history it keeps
  // (sql/migrations/0001_baseline.sql has those indexes). Sequential scans are off for the statement: with
  // statistics taken while a table was empty, the planner would read the
  // whole table every minute instead.
  const purge = async (name: string, batch: (client: pg.ClientBase) => Promise<number>): Promise<void> => {
    let total = 0;
    for (;;) {
      const count = await inTransaction(pool, async (client) => {
        await client.query('set local enable_seqscan = off');
        return batch(client);
      });
      total += count;
      if (count < batchSize) break;
    }
    if (total > 0) deleted[name] = total;
  };
  // Rows whose time column is past the cutoff, oldest first, through that
  // column's index. Each table is named in full: test/lifecycle/one-writer.test.ts
  // reads every delete, and one whose table is put together could be any.
  const purgeOlder = (name: string, sql: string): Promise<void> =>
    purge(name, async (client) => {
      const { rowCount } = await client.query(sql, [options.retentionDays, batchSize]);
      return rowCount ?? 0;
    });
  await purgeOlder(
    'events',
    `delete from asset_webhooks.events where event_id in (
       select event_id from asset_webhooks.events where coalesced_at < ${cutoff} order by coalesced_at limit $2)`,
  );
  // Payloads are the lifecycle module's to delete.
  await purge('payloads', (client) => purgePayloads(client, options.retentionDays, batchSize));
  await purgeOlder(
    'coalesce_runs',
    `delete from asset_webhooks.coalesce_runs where run_id in (
       select run_id from asset_webhooks.coalesce_runs where started_at < ${cutoff} order by started_at limit $2)`,
  );
  // Every event routed by a configuration was coalesced before its last use.
  await purgeOlder(
    'routings',
    `delete from asset_webhooks.routings where routing_id in (
       select routing_id from asset_webhooks.routings where last_used_at < ${cutoff} order by last_used_at limit $2)`,
  );
  await purgeOlder(
    'ticks',
    `delete from asset_webhooks.ticks where slot in (
       select slot from asset_webhooks.ticks where created_at < ${cutoff} order by created_at limit $2)`,
  );
  if (Object.keys(deleted).length > 0) logger.info({ deleted }, 'retention cleanup');
  return { deleted };
}

async function warnOfLongTransaction(options: MaintenanceOptions): Promise<void> {
  const oldest = await oldestTransactionAge(options.pool);
  if (!oldest || oldest.seconds < (options.longTransactionSeconds ?? 600)) return;
  const { rows } = await options.pool.query<{ waiting: boolean }>(
    "select exists (select 1 from asset_webhooks.payloads where status = 'pending') as waiting",
  );
  if (!rows[0]?.waiting) return;
  options.logger.warn(
    {
      ageSeconds: Math.round(oldest.seconds),
      pid: oldest.pid,
      applicationName: oldest.applicationName,
      state: oldest.state,
    },
    'a long open transaction holds back the cleanup of delivered payloads: delivery slows until it ends (sql/runbooks/backlog-and-lag.sql)',
  );
}
