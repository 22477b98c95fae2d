import type pg from 'pg';
import type { DeadLetterReason } from '../interfaces.js';

/** The delivery state of one payload, read under a row lock. */
export interface PayloadForDelivery {
  readonly payloadId: number;
  readonly webhookId: string;
  readonly status: 'open' | 'pending' | 'delivered' | 'dead_lettered';
  readonly dispatched: boolean;
  readonly series: number;
  readonly attempts: number;
  readonly seriesStartedAt: Date;
  readonly body: string;
}

export async function lockPayload(client: pg.PoolClient, payloadId: number): Promise<PayloadForDelivery | null> {
  const { rows } = await client.query<{
    payload_id: number; webhook_id: string; status: PayloadForDelivery['status']; dispatched: boolean;
    series: number; attempts: number; series_started_at: Date; body: string;
  }>(
    `select payload_id, webhook_id, status, dispatched, series, attempts, series_started_at, body
     from asset_webhooks.payloads where payload_id = $1 for update`,
    [payloadId],
  );
  const row = rows[0];
  if (!row) return null;
  return {
    payloadId: row.payload_id, webhookId: row.webhook_id, status: row.status, dispatched: row.dispatched,
    series: row.series, attempts: row.attempts, seriesStartedAt: row.series_started_at, body: row.body,
  };
}

/** Whether attempt `attemptNo` of the series was started but never got a result (a crash mid-attempt). */
export async function attemptUnfinished(client: pg.PoolClient, payloadId: number, series: number, attemptNo: number): Promise<boolean> {
  const { rows } = await client.query(
    'select 1 from asset_webhooks.attempts where payload_id = $1 and series = $2 and attempt_no = $3 and outcome is null',
    [payloadId, series, attemptNo],
  );
  return rows.length > 0;
}

/**
 * Records the start of an attempt before the request is sent, so that a crash
 * mid-attempt leaves a row without a result rather than no row.
 */
export async function startAttempt(client: pg.PoolClient, payload: PayloadForDelivery, attemptNo: number, startedAt: Date): Promise<void> {
  await client.query(
    'insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at) values ($1, $2, $3, $4)',
    [payload.payloadId, payload.series, attemptNo, startedAt],
  );
  await client.query(
    'update asset_webhooks.payloads set attempts = $2, last_attempt_at = $3 where payload_id = $1',
    [payload.payloadId, attemptNo, startedAt],
  );
}

export interface AttemptResult {
  readonly durationMs: number | null;
  readonly statusCode: number | null;
  readonly errorClass: string | null;
  readonly errorMessage: string | null;
  readonly responseExcerpt: string | null;
  readonly outcome: 'delivered' | 'retry' | Exclude<DeadLetterReason, 'too_large'>;
}

/**
 * Records an attempt's result and applies the payload's next state in one
 * statement (see asset_webhooks.settle_attempt). Returns false when the payload
 * moved on meanwhile (an operator's redelivery): then only the result is kept.
 */
export async function settleAttempt(
  client: pg.PoolClient | pg.Pool,
  payload: Pick<PayloadForDelivery, 'payloadId' | 'series'>,
  attemptNo: number,
  result: AttemptResult,
  at: Date,
  retryAt: Date | null,
): Promise<boolean> {
  const { rows } = await client.query<{ applied: boolean }>(
    'select asset_webhooks.settle_attempt($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) as applied',
    [payload.payloadId, payload.series, attemptNo, result.durationMs, result.statusCode, result.errorClass, result.errorMessage,
      result.responseExcerpt, result.outcome, at, retryAt],
  );
  return rows[0]?.applied === true;
}

export async function markDeadLettered(client: pg.PoolClient, payloadId: number, reason: DeadLetterReason, at: Date): Promise<void> {
  await client.query(
    `update asset_webhooks.payloads
     set status = 'dead_lettered', dead_letter_reason = $2, dead_lettered_at = $3, dispatched = false, next_attempt_at = null
     where payload_id = $1`,
    [payloadId, reason, at],
  );
}

/** Gives a dispatched payload back to the pump (its webhook is disabled or gone). */
export async function handBack(client: pg.PoolClient, payloadId: number): Promise<void> {
  await client.query('update asset_webhooks.payloads set dispatched = false where payload_id = $1', [payloadId]);
}

/**
 * Passes the slot of a delivery that just ended to the webhook's next pending
 * payload, in the same transaction (see asset_webhooks.hand_off). Cheaper than
 * the dispatch pump, which serialises on a lock per webhook.
 */
export async function handOff(client: pg.PoolClient, webhookId: string): Promise<void> {
  await client.query('select asset_webhooks.hand_off($1)', [webhookId]);
}
