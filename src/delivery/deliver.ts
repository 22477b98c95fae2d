import type pg from 'pg';
import type { Logger } from 'pino';
import { describeError, isConnectionError } from '../db/connect.js';
import { inTransaction } from '../db/transaction.js';
import { HAND_BACK_AFTER_MINUTES } from '../maintenance/maintenance.js';
import type { SecretResolver } from '../secrets/types.js';
import {
  abandonAttempt, attemptUnfinished, handBack, handOff, lockPayload, markDeadLettered, settleAttempt, startAttempt,
  type AttemptResult, type ChainedPayload, type PayloadForDelivery, type SettleRequest,
} from './attempt-store.js';
import type { HttpSender, PostResult } from './http/sender.js';
import { signedHeaders } from './http/signing.js';
import { classifyResponse } from './policy/classify.js';
import { isExpired, nextState } from './policy/next-state.js';
import type { SettleBatcher } from './settle-batcher.js';

/** The job payload of the `deliver` task: one attempt of one payload. */
export interface DeliverJob {
  readonly payloadId: number;
  readonly series: number;
  /** The attempt this job makes, counted from 1 within the series. */
  readonly attempt: number;
}

/** What delivery needs of one configured webhook. */
export interface DeliveryWebhook {
  readonly id: string;
  readonly url: string;
  readonly enabled: boolean;
  /** Paused: its payloads are not sent (an attempt already started finishes). Default false. */
  readonly paused?: boolean | undefined;
  readonly apikey?: string | undefined;
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** Standard Webhooks signing: `secret` names a secret holding one or more `whsec_` keys. */
  readonly signing?: { readonly secret: string } | undefined;
}

export interface DeliverySettings {
  readonly delaysSeconds: readonly number[];
  readonly deadLetterAfterSeconds: number;
}

/** Everything a delivery attempt talks to; the service builds it once and on reload. */
export interface DeliveryContext {
  readonly pool: pg.Pool;
  /** Writes the results of attempts made outside a transaction, several per statement when busy. */
  readonly settler: Pick<SettleBatcher, 'settle'>;
  readonly sender: Pick<HttpSender, 'post'>;
  readonly secrets: SecretResolver;
  webhook(id: string): DeliveryWebhook | undefined;
  settings(): DeliverySettings;
  readonly logger: Logger;
  now(): Date;
  /** Told of every finished attempt (metrics). */
  onAttempt?(webhookId: string, result: AttemptResult): void;
  /**
   * How long one job may go on with its webhook's next payloads (a chain)
   * before handing the slot to a job of its own, so that webhooks take turns
   * on the worker. 0 turns chains off. Default 5,000 ms.
   */
  readonly chainBudgetMs?: number;
  /** Aborted when the service stops: a chain then ends after its current attempt. */
  readonly stopping?: AbortSignal;
}

export type DeliverOutcome =
  | { kind: 'stale' }
  | { kind: 'handed_back' }
  | { kind: 'expired' }
  | { kind: 'attempted'; result: AttemptResult };

/**
 * One delivery attempt of one payload, in three steps so that no step holds a
 * row lock across the network:
 *   1. in a transaction: check the job is still current, record the start of
 *      the attempt (or hand the payload back when its webhook is disabled or
 *      paused, or dead-letter it when it expired);
 *   2. resolve the API key and POST the stored body;
 *   3. in one statement (asset_webhooks.settle_attempt): record the result
 *      and apply the payload's next state as the retry policy decided it
 *      (delivered, a retry job at the policy's time, or dead-lettered), and
 *      pass the slot to the webhook's next payload.
 * When the payload ends for good, step 3 may take the next payload into this
 * job with its attempt already started (a chain, within chainBudgetMs), so a
 * backlog costs one statement per payload rather than a job each.
 * An HTTP outcome never throws: graphile-worker's own retries are left for
 * failures of our own (the database), and a job re-run after a crash finds its
 * attempt unfinished and counts it as a failed attempt.
 * The outcome returned is that of the job's own payload.
 */
export async function deliverPayload(job: DeliverJob, context: DeliveryContext): Promise<DeliverOutcome> {
  const start = await inTransaction(context.pool, async (client) => {
    const payload = await lockPayload(client, job.payloadId);
    if (!payload || payload.status !== 'pending' || !payload.dispatched || payload.series !== job.series) {
      return { kind: 'stale' } as const;
    }
    if (payload.attempts === job.attempt && (await attemptUnfinished(client, payload.payloadId, payload.series, job.attempt))) {
      const result: Omit<AttemptResult, 'outcome'> = {
        durationMs: null, statusCode: null, errorClass: 'interrupted', errorMessage: 'the worker stopped before the attempt was recorded', responseExcerpt: null,
      };
      const settled = await settle(client, context, payload, job.attempt, result, 'retryable', false);
      return { kind: 'attempted', result: settled.result } as const;
    }
    if (payload.attempts !== job.attempt - 1) return { kind: 'stale' } as const;
    const webhook = context.webhook(payload.webhookId);
    if (!sendsTo(webhook)) {
      // Disabled, paused or removed: the payload waits undispatched (a retry
      // keeps its time) until the pump starts it again.
      await handBack(client, payload.payloadId);
      return { kind: 'handed_back' } as const;
    }
    const now = context.now();
    if (isExpired(payload.seriesStartedAt, now, context.settings().deadLetterAfterSeconds)) {
      await markDeadLettered(client, payload.payloadId, 'expired', now);
      await handOff(client, payload.webhookId);
      context.logger.warn({ payloadId: payload.payloadId, webhookId: payload.webhookId, reason: 'expired' }, 'payload dead-lettered');
      return { kind: 'expired' } as const;
    }
    await startAttempt(client, payload, job.attempt, now);
    return { kind: 'send', payload, webhook } as const;
  });
  if (start.kind !== 'send') return start;

  const budgetEnds = performance.now() + (context.chainBudgetMs ?? 5000);
  let current: { payload: ChainedPayload; webhook: DeliveryWebhook } = { payload: { ...start.payload, attemptNo: job.attempt }, webhook: start.webhook };
  let first: AttemptResult | undefined;
  for (;;) {
    const chain = performance.now() < budgetEnds && context.stopping?.aborted !== true;
    const { result, next } = await attempt(context, current.payload, current.webhook, chain);
    first ??= result;
    if (!next) break;
    const webhook = context.webhook(next.webhookId);
    if (!sendsTo(webhook)) {
      // A reload disabled or paused it after the database chose the payload: put it back as it was.
      await abandonAttempt(context.pool, next);
      break;
    }
    current = { payload: next, webhook };
  }
  return { kind: 'attempted', result: first };
}

/** Whether attempts may start for the webhook: configured, enabled and not paused. */
function sendsTo(webhook: DeliveryWebhook | undefined): webhook is DeliveryWebhook {
  return webhook !== undefined && webhook.enabled && webhook.paused !== true;
}

/** Steps 2 and 3 of a started attempt: POST, then settle (and maybe take the next payload). */
async function attempt(
  context: DeliveryContext,
  payload: ChainedPayload,
  webhook: DeliveryWebhook,
  chain: boolean,
): Promise<{ result: AttemptResult; next: ChainedPayload | null }> {
  const started = performance.now();
  const post = await send(context, webhook, payload);
  if (post.kind === 'response' && (post.statusCode === 401 || post.statusCode === 403)) {
    // A key may have been rotated: read it again on the next attempt.
    if (webhook.apikey) context.secrets.invalidate(webhook.apikey);
    if (webhook.signing) context.secrets.invalidate(webhook.signing.secret);
  }
  // One statement (shared with other results when busy): it locks the payload,
  // checks an operator did not act meanwhile, records the result and applies the next state.
  const { result, next, applied } = await whileDatabaseAway(context, { payloadId: payload.payloadId, webhookId: webhook.id }, started,
    () => settle(context.settler, context, payload, payload.attemptNo, describe(post), classifyResponse(post), chain));
  const log = {
    payloadId: payload.payloadId, attempt: payload.attemptNo, webhookId: webhook.id,
    statusCode: result.statusCode, errorClass: result.errorClass, outcome: result.outcome, durationMs: result.durationMs,
  };
  if (!applied) {
    context.logger.warn(log, 'attempt recorded, but the payload had moved on meanwhile (handed back or redelivered): its result does not change the payload');
  } else if (result.outcome === 'delivered') context.logger.info(log, 'payload delivered');
  else context.logger.warn(log, result.outcome === 'retry' ? 'delivery attempt failed; will retry' : 'payload dead-lettered');
  context.onAttempt?.(webhook.id, result);
  return { result, next };
}

/**
 * Writes a result the receiver already gave. While the database cannot be
 * reached the write is tried again, with growing pauses, until
 * RECORD_RESULT_FOR_MS after the attempt started (ten seconds once the service
 * is stopping). That is two minutes short of maintenance's hand-back, which
 * comes HAND_BACK_AFTER_MINUTES after the attempt's start: a result written in
 * time is never raced by a second send, unless this process alone lost the
 * database long enough for another to take it for dead (its lease was free:
 * see runMaintenance's processGoneGraceSeconds); the result is then recorded
 * as not applied. Given up, the attempt stays
 * unfinished, its webhook waits for maintenance to hand the payload back, and
 * the payload is sent again: a duplicate for a receiver that had answered 2xx.
 */
async function whileDatabaseAway<T>(
  context: DeliveryContext, about: { payloadId: number; webhookId: string }, attemptStarted: number, write: () => Promise<T>,
): Promise<T> {
  // When a failed write first found the service stopping: from then on it has ten seconds.
  let stopSeen: number | undefined;
  for (let retry = 0; ; retry += 1) {
    try {
      return await write();
    } catch (error) {
      const now = performance.now();
      if (context.stopping?.aborted === true) stopSeen ??= now;
      const outOfTime = now - attemptStarted >= RECORD_RESULT_FOR_MS || (stopSeen !== undefined && now - stopSeen >= 10_000);
      if (!isConnectionError(error) || outOfTime) throw error;
      if (retry === 0) context.logger.warn({ ...about, err: describeError(error) }, 'could not record a delivery attempt: the database is unreachable; trying again');
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** retry, 5000)));
    }
  }
}

/** How long after an attempt's start its result is still written (see whileDatabaseAway). */
const RECORD_RESULT_FOR_MS = (HAND_BACK_AFTER_MINUTES - 2) * 60_000;

/** Decides the next state (the retry policy) and records it with the attempt's result. */
async function settle(
  writer: pg.PoolClient | Pick<SettleBatcher, 'settle'>,
  context: DeliveryContext,
  payload: Pick<PayloadForDelivery, 'payloadId' | 'series' | 'seriesStartedAt'>,
  attemptNo: number,
  result: Omit<AttemptResult, 'outcome'>,
  classification: ReturnType<typeof classifyResponse>,
  chain: boolean,
): Promise<{ result: AttemptResult; next: ChainedPayload | null; applied: boolean }> {
  const now = context.now();
  const settings = context.settings();
  const next = nextState({
    classification,
    attemptsMade: attemptNo,
    createdAt: payload.seriesStartedAt,
    now,
    delaysSeconds: settings.delaysSeconds,
    deadLetterAfterSeconds: settings.deadLetterAfterSeconds,
  });
  const outcome: AttemptResult['outcome'] = next.kind === 'delivered' ? 'delivered' : next.kind === 'retry' ? 'retry' : next.reason;
  const recorded: AttemptResult = { ...result, outcome };
  const request: SettleRequest = {
    payload, attemptNo, result: recorded, at: now, retryAt: next.kind === 'retry' ? next.at : null,
    slot: { chain, expireAfterSeconds: settings.deadLetterAfterSeconds },
  };
  const settled = 'settle' in writer ? await writer.settle(request) : await settleAttempt(writer, request);
  // Superseded by an operator's redelivery: the result is kept as a plain failed try.
  return settled.applied
    ? { result: recorded, next: settled.next, applied: true }
    : { result: { ...recorded, outcome: 'retry' }, next: null, applied: false };
}

/**
 * Resolves the API key and the signing keys, signs and posts; a secret that
 * cannot be resolved, or signing keys that are malformed, fail this attempt as
 * retryable.
 */
async function send(context: DeliveryContext, webhook: DeliveryWebhook, payload: Pick<ChainedPayload, 'payloadId' | 'body'>): Promise<PostResult> {
  const { body } = payload;
  const headers: Record<string, string> = { ...webhook.headers };
  try {
    if (webhook.apikey) headers['X-API-Key'] = await context.secrets.resolve(webhook.apikey);
    if (webhook.signing) Object.assign(headers, await signedHeaders(context.secrets, webhook.signing.secret, payload.payloadId, body));
  } catch (error) {
    return { kind: 'error', errorClass: 'secret_unavailable', message: error instanceof Error ? error.message : String(error), durationMs: 0 };
  }
  return context.sender.post({ url: webhook.url, body, headers });
}

function describe(post: PostResult): Omit<AttemptResult, 'outcome'> {
  return post.kind === 'response'
    ? { durationMs: Math.round(post.durationMs), statusCode: post.statusCode, errorClass: null, errorMessage: null, responseExcerpt: post.responseExcerpt }
    : { durationMs: Math.round(post.durationMs), statusCode: null, errorClass: post.errorClass, errorMessage: post.message, responseExcerpt: null };
}
