import type pg from 'pg';
import { inTransaction } from '../db/transaction.js';
import { storableText } from '../text/storable-text.js';

/**
 * The changes of a payload's state, and the only place that builds the rows
 * of asset_webhooks.payload_transition that asset_webhooks.transition_payloads
 * applies (sql/migrations/0001_baseline.sql: the states, which change applies
 * to which, and why one is refused). Delivery, crash recovery, the expiry
 * sweep, the redelivery commands and the resume of a paused webhook all go
 * through it. A transition that does not apply to the payload's state
 * answers applied = false with a reason; it never fails the others.
 */

/** An attempt's result, its outcome decided by the retry policy; `interrupted`: closed by crash recovery. */
export interface AttemptResultTransition {
  readonly kind: 'attempt_result' | 'interrupted';
  readonly payloadId: number;
  readonly series: number;
  readonly attemptNo: number;
  readonly outcome: 'delivered' | 'retry' | 'rejected' | 'retries_exhausted' | 'expired';
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
  return `array(select jsonb_populate_record(null::asset_webhooks.payload_transition, r.t)
                from unnest($${n}::jsonb[]) with ordinality as r(t, i) order by r.i)`;
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
 * each moves to that webhook. Built in SQL from the ids, so a bulk
 * redelivery of many sends one array of ids. The answers in the order of
 * `payloadIds`, with the series each started.
 */
export async function redeliverPayloads(
  client: pg.Pool | pg.ClientBase,
  payloadIds: readonly number[],
  { requestedBy, toWebhookId }: { requestedBy: string; toWebhookId: string | null },
): Promise<Array<Omit<TransitionAnswer, 'outcome'> & { payloadId: number; series: number | null }>> {
  const { rows } = await client.query<Omit<AnswerRow, 'outcome'>>(
    `select a.applied, a.reason
     from asset_webhooks.transition_payloads(array(
            select jsonb_populate_record(null::asset_webhooks.payload_transition,
                     jsonb_build_object('kind', 'redelivery', 'payload_id', i.payload_id,
                                        'requested_by', $2::text, 'to_webhook_id', $3::text))
            from unnest($1::bigint[]) with ordinality as i(payload_id, n) order by i.n)) a
     order by a.idx`,
    [payloadIds, requestedBy, toWebhookId],
  );
  // Read by a statement of its own: the one above does not see what its function wrote.
  const { rows: series } = await client.query<{ payload_id: number; series: number }>(
    'select payload_id, series from asset_webhooks.payloads where payload_id = any($1::bigint[])',
    [payloadIds],
  );
  const seriesOf = new Map(series.map((row) => [row.payload_id, row.series]));
  return rows.map((row, index) => {
    const payloadId = payloadIds[index]!;
    return { applied: row.applied, reason: row.reason, payloadId, series: seriesOf.get(payloadId) ?? null };
  });
}

/**
 * Resumes every paused webhook not in `stillPaused`: in one transaction, the
 * rows of those webhooks are locked, each of their open and pending payloads
 * gets a pause_shift transition (its window moves forward by the time it
 * spent paused), and paused_since is cleared. The row lock makes concurrent
 * resumes (several `run` processes reloading) shift once: the second finds
 * paused_since already cleared. Returns the webhooks resumed.
 */
export async function resumeWebhooks(pool: pg.Pool, stillPaused: readonly string[]): Promise<string[]> {
  return inTransaction(pool, async (client) => {
    const { rows: resumed } = await client.query<{ webhook_id: string }>(
      `select w.webhook_id from asset_webhooks.webhooks w
       where w.paused_since is not null and not (w.webhook_id = any($1::text[]))
       order by w.webhook_id for update`,
      [stillPaused],
    );
    if (resumed.length === 0) return [];
    const ids = resumed.map((row) => row.webhook_id);
    await client.query(
      `select count(*) from asset_webhooks.transition_payloads(array(
         select jsonb_populate_record(null::asset_webhooks.payload_transition,
                  jsonb_build_object('kind', 'pause_shift', 'payload_id', p.payload_id, 'paused_since', w.paused_since))
         from asset_webhooks.payloads p
         join asset_webhooks.webhooks w on w.webhook_id = p.webhook_id
         where w.webhook_id = any($1::text[]) and p.status in ('open', 'pending') and p.series_started_at < now()
         order by p.payload_id))`,
      [ids],
    );
    const { rows } = await client.query<{ webhook_id: string }>(
      `update asset_webhooks.webhooks w set paused_since = null, updated_at = now()
       where w.webhook_id = any($1::text[]) returning w.webhook_id`,
      [ids],
    );
    return rows.map((row) => row.webhook_id);
  });
}
