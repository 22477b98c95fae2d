import type pg from 'pg';
import { inTransaction } from '../db/transaction.js';
import { storableText } from '../text/storable-text.js';

/**
 * The changes of a payload's state after it is written, the TypeScript half of
 * the lifecycle module (docs/payload-lifecycle.md): every statement takes an
 * array and calls a function of the SQL half (sql/functions/README.md).
 * Delivery, crash recovery, the expiry sweep, the redelivery commands and the
 * resume of a paused webhook all go through it. Every transition row is built
 * one way, by asset_webhooks.payload_transitions from the JSON objects of
 * rowOf. A transition that does not apply to the payload's state answers
 * applied = false with a reason; it never fails the others.
 */

/** An attempt's result, its outcome decided by the retry policy; `interrupted`: closed by crash recovery. */
export interface AttemptResultTransition {
  readonly kind: 'attempt_result' | 'interrupted';
  readonly payloadId: number;
  readonly series: number;
  readonly attemptNo: number;
  readonly outcome: 'delivered' | 'retry' | 'suspended' | 'rejected' | 'retries_exhausted' | 'expired';
  /** When it happened (delivered_at, dead_lettered_at); null: the database's clock (asset_webhooks.now()). */
  readonly at: Date | null;
  /**
   * Outcome retry: the delay in ms, from the database's clock as the result
   * is written, before the payload is sent again; never past its window's end.
   */
  readonly retryInMs: number | null;
  /**
   * retry.deadLetterAfterSeconds: a retry decided by the database's clock at
   * or after series_started_at + windowSeconds is written `expired` instead;
   * null: no window.
   */
  readonly windowSeconds: number | null;
  readonly durationMs: number | null;
  readonly statusCode: number | null;
  readonly errorClass: string | null;
  readonly errorMessage: string | null;
  readonly responseExcerpt: string | null;
  /** When the request was sent, recorded as the attempt's start; null: the claim's time stays. */
  readonly sentAt: Date | null;
  readonly receiverFailed: boolean | null;
  /** The receiver's Retry-After in ms from the database's clock: no payload of the webhook is claimed before it ends. */
  readonly holdWebhookForMs: number | null;
}

/** A payload not in flight dead-lettered as expired. */
export interface ExpiryTransition {
  readonly kind: 'expiry';
  readonly payloadId: number;
  readonly series: number;
  /** Null: the database's clock. */
  readonly at: Date | null;
}

/** A claimed attempt that will not be made: the payload goes back to its queue as it was. */
export interface GivenBackTransition {
  readonly kind: 'given_back';
  readonly payloadId: number;
  readonly series: number;
  readonly attemptNo: number;
}

export type Transition = AttemptResultTransition | ExpiryTransition | GivenBackTransition;

/** transition_payloads' answer to one transition. */
export interface TransitionAnswer {
  readonly applied: boolean;
  /** Why it was refused (see asset_webhooks.transition_refusal); null when it applied. */
  readonly reason: string | null;
  /** An applied attempt result's outcome as written: a retry decided past its window's end is `expired`. */
  readonly outcome: string | null;
}

/**
 * A time as the row holds it. An invalid Date stays one the database refuses
 * (22007), as a bound timestamptz parameter would: the statement fails
 * rather than writing no time.
 */
function timeOf(date: Date | null): string | null {
  if (date === null) return null;
  return Number.isNaN(date.getTime()) ? String(date) : date.toISOString();
}

/**
 * A delay as the row's interval holds it. One that is not a finite number
 * stays text the database refuses, as timeOf does.
 */
function intervalOf(ms: number | null): string | null {
  if (ms === null) return null;
  return Number.isFinite(ms) ? `${Math.round(ms)} milliseconds` : String(ms);
}

/** The row of asset_webhooks.payload_transition, by field name. */
function rowOf(transition: Transition): Record<string, unknown> {
  switch (transition.kind) {
    case 'attempt_result':
    case 'interrupted':
      return {
        kind: transition.kind,
        payload_id: transition.payloadId,
        series: transition.series,
        attempt: transition.attemptNo,
        outcome: transition.outcome,
        at: timeOf(transition.at),
        retry_in: intervalOf(transition.retryInMs),
        window_seconds: transition.windowSeconds,
        duration_ms: transition.durationMs,
        status_code: transition.statusCode,
        // Whatever a receiver or a library said, a text column can hold it.
        error_class: storableText(transition.errorClass),
        error_message: storableText(transition.errorMessage),
        response_excerpt: storableText(transition.responseExcerpt),
        started_at: timeOf(transition.sentAt),
        receiver_failed: transition.receiverFailed,
        hold_in: intervalOf(transition.holdWebhookForMs),
      };
    case 'expiry':
      return { kind: 'expiry', payload_id: transition.payloadId, series: transition.series, at: timeOf(transition.at) };
    case 'given_back':
      return {
        kind: 'given_back',
        payload_id: transition.payloadId,
        series: transition.series,
        attempt: transition.attemptNo,
      };
  }
}

/**
 * The query parameter of a batch of transitions: one JSON object per row,
 * named by field (a jsonb[] parameter), in order.
 */
export function transitionsParameter(transitions: readonly Transition[]): Array<Record<string, unknown>> {
  return transitions.map(rowOf);
}

/** The SQL expression that reads parameter $n (transitionsParameter) as asset_webhooks.payload_transition[]. */
export function transitionsArray(n: number): string {
  return `asset_webhooks.payload_transitions($${n}::jsonb[])`;
}

interface AnswerRow {
  applied: boolean;
  reason: string | null;
  outcome: string | null;
}

function toAnswer(row: AnswerRow): TransitionAnswer {
  return { applied: row.applied, reason: row.reason, outcome: row.outcome };
}

/** Applies transitions in one statement: the answers in order. */
export async function applyTransitions(
  client: pg.Pool | pg.ClientBase,
  transitions: readonly Transition[],
): Promise<TransitionAnswer[]> {
  const { rows } = await client.query<AnswerRow>(
    `select applied, reason, outcome from asset_webhooks.transition_payloads(${transitionsArray(1)}) order by idx`,
    [transitionsParameter(transitions)],
  );
  return rows.map(toAnswer);
}

/**
 * Redelivers dead-lettered payloads, each in a new series, recorded in
 * asset_webhooks.redeliveries as asked by `requestedBy`; with `toWebhookId`
 * each moves to that webhook (asset_webhooks.redeliver_payloads). One
 * statement for any number of ids. The answers in the order of `payloadIds`,
 * with the series each has after it.
 */
export async function redeliverPayloads(
  client: pg.Pool | pg.ClientBase,
  payloadIds: readonly number[],
  { requestedBy, toWebhookId }: { requestedBy: string; toWebhookId: string | null },
): Promise<Array<Omit<TransitionAnswer, 'outcome'> & { payloadId: number; series: number | null }>> {
  const { rows } = await client.query<{
    payload_id: number;
    applied: boolean;
    reason: string | null;
    series: number | null;
  }>('select payload_id, applied, reason, series from asset_webhooks.redeliver_payloads($1::bigint[], $2, $3)', [
    payloadIds,
    requestedBy,
    toWebhookId,
  ]);
  return rows.map((row, index) => ({
    applied: row.applied,
    reason: row.reason,
    payloadId: payloadIds[index]!,
    series: row.series,
  }));
}

/**
 * Replays delivered payloads, each in a new series, recorded in
 * asset_webhooks.redeliveries with `replayId` as asked by `requestedBy`;
 * with `toWebhookId` each moves to that webhook
 * (asset_webhooks.replay_payloads). One statement for any number of ids. The
 * answers in the order of `payloadIds`, with the series each has after it.
 */
export async function replayPayloads(
  client: pg.Pool | pg.ClientBase,
  payloadIds: readonly number[],
  { replayId, requestedBy, toWebhookId }: { replayId: number; requestedBy: string; toWebhookId: string | null },
): Promise<Array<Omit<TransitionAnswer, 'outcome'> & { payloadId: number; series: number | null }>> {
  const { rows } = await client.query<{ applied: boolean; reason: string | null; series: number | null }>(
    'select applied, reason, series from asset_webhooks.replay_payloads($1::bigint[], $2, $3, $4)',
    [payloadIds, replayId, requestedBy, toWebhookId],
  );
  return rows.map((row, index) => ({
    applied: row.applied,
    reason: row.reason,
    payloadId: payloadIds[index]!,
    series: row.series,
  }));
}

/**
 * Resumes every paused webhook not in `stillPaused`
 * (asset_webhooks.resume_webhooks): each of its open and pending payloads'
 * windows moves forward by the time it spent paused, and paused_since is
 * cleared, once however many processes resume at the same time. Returns the
 * webhooks resumed.
 */
export async function resumeWebhooks(pool: pg.Pool, stillPaused: readonly string[]): Promise<string[]> {
  const { rows } = await pool.query<{ webhook_id: string }>(
    'select w as webhook_id from asset_webhooks.resume_webhooks($1::text[]) w',
    [stillPaused],
  );
  return rows.map((row) => row.webhook_id).sort();
}

/** What `resume --webhook ID` found and did (asset_webhooks.resume_gone_webhook). */
export interface GoneResume {
  /** A 410 Gone answer held the webhook (retry.disableOnGone). */
  readonly wasGone: boolean;
  /** Sent to again now; false while its document still pauses it (`paused: true`). */
  readonly resumed: boolean;
  /** Its payloads waiting to be sent. */
  readonly waiting: number;
}

/**
 * Ends the suspension of a webhook by a 410 Gone answer
 * (asset_webhooks.resume_gone_webhook): unless its document pauses it, it is
 * resumed as a pause is, each waiting payload's window moving forward by the
 * time it was held. Null when the database knows no such webhook.
 */
export async function resumeGoneWebhook(pool: pg.Pool | pg.ClientBase, webhookId: string): Promise<GoneResume | null> {
  const { rows } = await pool.query<{ was_gone: boolean; resumed: boolean; waiting: number }>(
    'select was_gone, resumed, waiting from asset_webhooks.resume_gone_webhook($1)',
    [webhookId],
  );
  const row = rows[0];
  return row === undefined ? null : { wasGone: row.was_gone, resumed: row.resumed, waiting: row.waiting };
}
