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
  readonly outcome: 'delivered' | 'retry' | Exclude<DeadLetterReason, 'too_large' | 'webhook_removed'>;
}

/** How the slot of a payload that ends for good is passed on (see asset_webhooks.settle_attempt). */
export interface SlotPolicy {
  /** Take the next payload into this job (a chain) instead of adding a job for it. */
  readonly chain: boolean;
  /** A taken payload whose series started this long ago is left to a job, which dead-letters it. */
  readonly expireAfterSeconds: number;
}

/** The webhook's next payload, taken into a chain with its attempt recorded as started. */
export interface ChainedPayload extends Omit<PayloadForDelivery, 'status' | 'dispatched'> {
  readonly attemptNo: number;
}

export interface Settled {
  /** False when the payload moved on meanwhile (an operator's redelivery): then only the result is kept. */
  readonly applied: boolean;
  readonly next: ChainedPayload | null;
}

/** The columns asset_webhooks.settle_attempt and settle_attempts return. */
interface SettledRow {
  applied: boolean; next_payload_id: number | null; next_webhook_id: string; next_series: number; next_attempt: number;
  next_series_started_at: Date; next_body: string;
}

/** One attempt's result, to be recorded and applied (see {@link settleAttempt}). */
export interface SettleRequest {
  readonly payload: Pick<PayloadForDelivery, 'payloadId' | 'series'>;
  readonly attemptNo: number;
  readonly result: AttemptResult;
  readonly at: Date;
  readonly retryAt: Date | null;
  readonly slot: SlotPolicy;
}

/**
 * Records an attempt's result and applies the payload's next state in one
 * statement (see asset_webhooks.settle_attempt); with `slot.chain`, also takes
 * the webhook's next payload and starts its attempt.
 */
export async function settleAttempt(client: pg.PoolClient | pg.Pool, request: SettleRequest): Promise<Settled> {
  const { payload, result, slot } = request;
  const { rows } = await client.query<SettledRow>(
    'select * from asset_webhooks.settle_attempt($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)',
    [payload.payloadId, payload.series, request.attemptNo, result.durationMs, result.statusCode, result.errorClass, result.errorMessage,
      result.responseExcerpt, result.outcome, request.at, request.retryAt, slot.chain, Math.ceil(slot.expireAfterSeconds)],
  );
  return settled(rows[0]);
}

/**
 * Settles several attempts in one statement (asset_webhooks.settle_attempts,
 * each exactly as {@link settleAttempt} would): the answers in request order.
 */
export async function settleAttempts(client: pg.ClientBase | pg.Pool, requests: readonly SettleRequest[]): Promise<Settled[]> {
  const column = <T>(pick: (request: SettleRequest) => T): T[] => requests.map(pick);
  const { rows } = await client.query<SettledRow & { idx: number }>(
    `select * from asset_webhooks.settle_attempts($1::bigint[], $2::int[], $3::int[], $4::int[], $5::int[], $6::text[], $7::text[],
       $8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::boolean[], $13::int[])`,
    [
      column((r) => r.payload.payloadId), column((r) => r.payload.series), column((r) => r.attemptNo),
      column((r) => r.result.durationMs), column((r) => r.result.statusCode), column((r) => r.result.errorClass),
      column((r) => r.result.errorMessage), column((r) => r.result.responseExcerpt), column((r) => r.result.outcome),
      column((r) => r.at), column((r) => r.retryAt), column((r) => r.slot.chain), column((r) => Math.ceil(r.slot.expireAfterSeconds)),
    ],
  );
  const answers: Settled[] = new Array(requests.length);
  for (const row of rows) answers[row.idx - 1] = settled(row);
  if (rows.length !== requests.length || answers.some((answer) => answer === undefined)) {
    throw new Error(`settle_attempts answered ${rows.length} of ${requests.length} results`);
  }
  return answers;
}

function settled(row: SettledRow | undefined): Settled {
  if (!row?.applied) return { applied: false, next: null };
  if (row.next_payload_id === null) return { applied: true, next: null };
  const attempts = row.next_attempt;
  return {
    applied: true,
    next: {
      payloadId: row.next_payload_id, webhookId: row.next_webhook_id, series: row.next_series, attempts, attemptNo: attempts,
      seriesStartedAt: row.next_series_started_at, body: row.next_body,
    },
  };
}

/** Undoes the start of a chained attempt that will not be made (see asset_webhooks.abandon_attempt). */
export async function abandonAttempt(client: pg.PoolClient | pg.Pool, payload: ChainedPayload): Promise<void> {
  await client.query('select asset_webhooks.abandon_attempt($1, $2, $3)', [payload.payloadId, payload.series, payload.attemptNo]);
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
