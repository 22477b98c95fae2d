import type pg from 'pg';

// What crash recovery (src/delivery/recover.ts) reads: the attempts it closes
// as interrupted and the payloads it expires. Both are decided by the
// database's clock (asset_webhooks.now()); recovery writes through
// src/lifecycle/transitions.ts.

/** An attempt in flight whose process is gone (asset_webhooks.orphaned_attempts). */
export interface OrphanedAttempt {
  readonly payloadId: number;
  readonly webhookId: string;
  readonly series: number;
  readonly attemptNo: number;
  readonly seriesStartedAt: Date;
  /** False for a standby its process never reported sent: recovery undoes it rather than counting it. */
  readonly sent: boolean;
}

export async function orphanedAttempts(
  pool: pg.Pool | pg.ClientBase,
  graceSeconds: number | null,
  namelessAfterSeconds: number,
): Promise<OrphanedAttempt[]> {
  const { rows } = await pool.query<{
    payload_id: number;
    webhook_id: string;
    series: number;
    attempt: number;
    series_started_at: Date;
    sent: boolean;
  }>({
    name: 'asset_webhooks.orphaned_attempts',
    text: `select payload_id, webhook_id, series, attempt, series_started_at, sent
           from asset_webhooks.orphaned_attempts($1, $2)`,
    values: [graceSeconds, namelessAfterSeconds],
  });
  return rows.map((row) => ({
    payloadId: row.payload_id,
    webhookId: row.webhook_id,
    series: row.series,
    attemptNo: row.attempt,
    seriesStartedAt: row.series_started_at,
    sent: row.sent,
  }));
}

/** Payloads past their window by the database's clock that are not in flight (asset_webhooks.expired_payloads). */
export async function expiredPayloads(
  pool: pg.Pool | pg.ClientBase,
  expireAfterSeconds: number,
  limit: number,
): Promise<Array<{ payloadId: number; series: number }>> {
  const { rows } = await pool.query<{ payload_id: number; series: number }>({
    name: 'asset_webhooks.expired_payloads',
    text: 'select payload_id, series from asset_webhooks.expired_payloads($1, $2)',
    values: [Math.ceil(expireAfterSeconds), limit],
  });
  return rows.map((row) => ({ payloadId: row.payload_id, series: row.series }));
}
