import type pg from 'pg';
import { isConnectionError } from '../db/connect.js';
import type { DeadLetterReason } from '../interfaces.js';
import { isLocalFault } from './local-fault.js';
import { applyTransitions, transitionsArray, transitionsParameter, type Transition } from '../lifecycle/transitions.js';

/**
 * The database side of delivery: claiming payloads, writing their next state
 * (through src/lifecycle/transitions.ts, the one way a payload's state
 * changes). The statements of every attempt are named, so each connection
 * parses and plans each call once: a call of a function is planned alike
 * whatever the tables hold, and the statements inside keep their plans for
 * the session too, each reaching payloads through an index by key or by a
 * webhook's queue range (test/delivery/cached-plans.test.ts). A named
 * statement names its columns: a function that gains one must not change
 * the prepared statement's result. What crash recovery and the expiry sweep
 * read is in recovery-reads.ts. See asset_webhooks.payloads in
 * sql/migrations/0001_baseline.sql for the payload states.
 */

/** A payload claimed for an attempt, its attempt recorded as started. */
export interface ClaimedPayload {
  readonly payloadId: number;
  readonly webhookId: string;
  readonly series: number;
  /** The attempt being made, counted from 1 within the series. */
  readonly attemptNo: number;
  /** The series' start, for the record: the window is counted from it in the database only (asset_webhooks.now()). */
  readonly seriesStartedAt: Date;
  readonly body: string;
  /**
   * Claimed ahead: its webhook had its concurrency in flight. Sent only in
   * place of a request to the same webhook that has ended and whose result is
   * not yet written, or given back (abandonAttempt). See ClaimRequest.standby.
   */
  readonly standby: boolean;
}

/**
 * A claim: the database decides by its own clock (asset_webhooks.now()) which
 * payloads are due and which have expired.
 */
export interface ClaimRequest {
  /** When the caller asked, by its own clock: standbys' age in the process (see Standbys). Not sent. */
  readonly now: Date;
  /** Most payloads to claim in all. */
  readonly max: number;
  /** Most payloads of one webhook per call, so that webhooks take turns. */
  readonly share: number;
  /** The webhook the previous call ended with: this one starts after it. */
  readonly after: string | null;
  readonly expireAfterSeconds: number;
  /**
   * Standby payloads: up to `perWebhook` more than the concurrency, for each
   * of `webhooks` (those the caller has requests open to), so that a request
   * that ends is replaced without waiting for a claim. None when absent.
   */
  readonly standby?: { readonly perWebhook: number; readonly webhooks: readonly string[] } | undefined;
}

/** One attempt of a payload. */
export type AttemptOf = Pick<ClaimedPayload, 'payloadId' | 'series' | 'attemptNo'>;

/** Claims due payloads and starts their attempts (asset_webhooks.claim_payloads). */
export async function claimPayloads(client: pg.Pool | pg.ClientBase, request: ClaimRequest): Promise<ClaimedPayload[]> {
  return (await claimDue(client, request)).claimed;
}

/** What a claim brought: its payloads, and when a webhook held by its rateLimit has its next token. */
export interface Claim {
  readonly claimed: ClaimedPayload[];
  /** Milliseconds until the earliest webhook held by its rate may be claimed again; null when none was held. */
  readonly wakeInMs: number | null;
}

/** claimPayloads, with the time to claim again for the webhooks its rate held (see Claim). */
export async function claimDue(client: pg.Pool | pg.ClientBase, request: ClaimRequest): Promise<Claim> {
  const { rows } = await client.query<ClaimedRow & { wake_in_ms: number | null }>({
    name: 'asset_webhooks.claim_payloads',
    text: `select payload_id, webhook_id, series, attempt, series_started_at, body, standby, wake_in_ms
           from asset_webhooks.claim_payloads($1, $2, $3, $4, $5, $6::text[])`,
    values: [
      request.max,
      request.share,
      request.after,
      Math.ceil(request.expireAfterSeconds),
      request.standby?.perWebhook ?? 0,
      request.standby?.webhooks ?? [],
    ],
  });
  // The wake-up rides on a row of its own, after the payloads.
  const wake = rows.find((row) => row.wake_in_ms !== null);
  return {
    claimed: rows.filter((row) => row.wake_in_ms === null).map(toClaimed),
    wakeInMs: wake?.wake_in_ms ?? null,
  };
}

interface ClaimedRow {
  payload_id: number;
  webhook_id: string;
  series: number;
  attempt: number;
  series_started_at: Date;
  body: string;
  standby: boolean;
}

function toClaimed(row: ClaimedRow): ClaimedPayload {
  return {
    payloadId: row.payload_id,
    webhookId: row.webhook_id,
    series: row.series,
    attemptNo: row.attempt,
    seriesStartedAt: row.series_started_at,
    body: row.body,
    standby: row.standby,
  };
}

export interface AttemptResult {
  readonly durationMs: number | null;
  readonly statusCode: number | null;
  /**
   * Why the attempt failed when no status says it: the sender's ErrorClass,
   * `interrupted` (crash recovery), or `unrecordable` (the result as made
   * could not be written: see Completer).
   */
  readonly errorClass: string | null;
  readonly errorMessage: string | null;
  readonly responseExcerpt: string | null;
  readonly outcome: AttemptOutcome;
}

/**
 * What an attempt can end in: delivered, retried, or dead-lettered for one of
 * the reasons an attempt decides (too_large and webhook_removed are decided
 * without one), or suspended (a 410 under retry.disableOnGone).
 */
export type AttemptOutcome =
  'delivered' | 'retry' | 'suspended' | Exclude<DeadLetterReason, 'too_large' | 'webhook_removed'>;

/** Every attempt outcome, for the metrics' series at zero; the check below fails to compile when the type gains one that is missing here. */
export const ATTEMPT_OUTCOMES = [
  'delivered',
  'retry',
  'rejected',
  'retries_exhausted',
  'expired',
  'suspended',
] as const satisfies readonly AttemptOutcome[];
const everyOutcomeListed: [Exclude<AttemptOutcome, (typeof ATTEMPT_OUTCOMES)[number]>] extends [never] ? true : never =
  true;
void everyOutcomeListed;

/**
 * One payload's next state, as the retry policy decided it, with the result
 * of the attempt that led to it (none for an expiry).
 */
export interface SettleRequest {
  readonly payload: { readonly payloadId: number; readonly series: number };
  /** The attempt this settles; null for the expiry of a payload not in flight. */
  readonly attemptNo: number | null;
  readonly result: AttemptResult;
  /** Outcome retry: the delay in ms before it is sent again, from the database's clock as it is written. */
  readonly retryInMs: number | null;
  /** retry.deadLetterAfterSeconds: the database turns a retry decided past the window's end into `expired`. */
  readonly windowSeconds: number | null;
  /** What the attempt says of the receiver's health (see receiverFailed); null: nothing. */
  readonly receiverFailed: boolean | null;
  /** The receiver's Retry-After in ms: no payload of the webhook is claimed before it ends. */
  readonly holdWebhookForMs: number | null;
}

export interface Settled {
  /** False when the payload had moved on (an operator's redelivery, another process's recovery): only the result is kept. */
  readonly applied: boolean;
  /** True when the database found a retry past its window's end and wrote it `expired` instead. */
  readonly expired?: true;
}

/**
 * The transition a settle request asks for: an expiry when it names no
 * attempt, else the attempt's result (interrupted when crash recovery closes
 * it: errorClass `interrupted`).
 */
function transitionOf(request: SettleRequest): Transition {
  const { payloadId, series } = request.payload;
  if (request.attemptNo === null) return { kind: 'expiry', payloadId, series, at: null };
  return {
    kind: request.result.errorClass === 'interrupted' ? 'interrupted' : 'attempt_result',
    payloadId,
    series,
    attemptNo: request.attemptNo,
    outcome: request.result.outcome,
    at: null,
    retryInMs: request.retryInMs,
    windowSeconds: request.windowSeconds === null ? null : Math.ceil(request.windowSeconds),
    durationMs: request.result.durationMs,
    statusCode: request.result.statusCode,
    errorClass: request.result.errorClass,
    errorMessage: request.result.errorMessage,
    responseExcerpt: request.result.responseExcerpt,
    sentAt: null,
    receiverFailed: request.receiverFailed,
    holdWebhookForMs: request.holdWebhookForMs,
  };
}

/**
 * Writes several payloads' next states in one statement, the standbys in
 * `sent` marked sent first (asset_webhooks.complete_attempts): the answers in
 * request order. Claims nothing.
 */
export async function completeAttempts(
  client: pg.ClientBase | pg.Pool,
  requests: readonly SettleRequest[],
  sent: readonly AttemptOf[] = [],
): Promise<Settled[]> {
  const { rows } = await client.query<{ applied: boolean; outcome: string | null }>({
    name: 'asset_webhooks.complete_attempts',
    text: `select applied, outcome from asset_webhooks.complete_attempts(${transitionsArray(1)},
             array(select jsonb_populate_record(null::asset_webhooks.attempt_key, k.key) from unnest($2::jsonb[]) as k(key)))`,
    values: [
      transitionsParameter(requests.map(transitionOf)),
      sent.map((attempt) => ({ payload_id: attempt.payloadId, series: attempt.series, attempt: attempt.attemptNo })),
    ],
  });
  if (rows.length !== requests.length) {
    throw new Error(`complete_attempts answered ${rows.length} of ${requests.length} results`);
  }
  return rows.map((row) =>
    row.applied && row.outcome === 'expired' ? { applied: true, expired: true } : { applied: row.applied },
  );
}

/**
 * Whether a write that failed with this error may succeed as it is when tried
 * again: a lost connection (isConnectionError), a connection this process
 * could not open for want of file descriptors or memory (isLocalFault), or a
 * deadlock or serialisation conflict the same statement resolves when run
 * again. Any other failure is the statement's own (a value the database
 * refuses, say).
 */
export function isTransientWriteError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return isConnectionError(error) || isLocalFault(error) || code === '40P01' || code === '40001';
}

/**
 * How many attempts of the payload's series before `attemptNo` failed for
 * want of local resources (errorClass `local_fault`): those do not count
 * against retry.delaysSeconds.
 */
export async function localFaultsBefore(
  client: pg.Pool | pg.ClientBase,
  payload: { readonly payloadId: number; readonly series: number },
  attemptNo: number,
): Promise<number> {
  const { rows } = await client.query<{ n: number }>({
    name: 'asset_webhooks.local_faults_before',
    text: `select count(*)::int as n from asset_webhooks.attempt_log
           where payload_id = $1 and series = $2 and attempt_no < $3 and error_class = 'local_fault'`,
    values: [payload.payloadId, payload.series, attemptNo],
  });
  return rows[0]?.n ?? 0;
}

/** Undoes the claim of an attempt that will not be made (a given_back transition: see asset_webhooks.transition_payloads). */
export async function abandonAttempt(client: pg.Pool | pg.ClientBase, payload: AttemptOf): Promise<void> {
  await applyTransitions(client, [
    { kind: 'given_back', payloadId: payload.payloadId, series: payload.series, attemptNo: payload.attemptNo },
  ]);
}
