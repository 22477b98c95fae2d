import { describeError } from '../db/connect.js';
import {
  abandonAttempt,
  isTransientWriteError,
  localFaultsBefore,
  type AttemptResult,
  type ClaimedPayload,
  type SettleRequest,
} from './attempt-store.js';
import { storableMessage, type PostResult } from './http/sender.js';
import { isLocalFault } from './local-fault.js';
import { signedHeaders, webhookMessageId } from './http/signing.js';
import { classifyResponse, type Classification } from './policy/classify.js';
import { nextState, outcomeOf, receiverFailed } from './policy/next-state.js';
import { parseRetryAfter } from './policy/retry-after.js';
import type { DeliveryContext, DeliveryWebhook } from './context.js';
import { endAttemptSpan, startAttemptSpan, type AttemptSpan } from './attempt-span.js';
import { logAttempt } from './attempt-log.js';

/** What the sender step tells its caller of an attempt under way. */
export interface AttemptProgress {
  /**
   * The request has ended, its result not yet written; `receiverHealthy`:
   * whether the answer says the receiver is healthy (anything but a retryable
   * failure). The claimer sends a standby in its place then.
   */
  answered(receiverHealthy: boolean): void;
  /** Its result goes to be written: from now on nothing may replace the request. */
  writing(): void;
}

/**
 * Makes one claimed attempt: POST the stored body, classify the answer, let
 * the retry policy decide the payload's next state, and write it
 * (the context's Completer). No step holds a row lock across the network,
 * and no time of this process's is written: the attempt's start is its
 * claim's (or, for a standby, when its sending is recorded), its end the
 * database's clock as the result is written; this process measures only
 * durations. An HTTP outcome never throws. Returns the attempt's result, or
 * null when the attempt was not made (the webhook is disabled, paused or gone
 * in this process's configuration: the claim is undone).
 *
 * `progress` hears how far the attempt has come (see AttemptProgress).
 *
 * The attempt runs in its span (startAttemptSpan), ended with its result;
 * with tracing on its POST carries the span as `traceparent` and its log
 * line the span's `trace_id`.
 */
export async function deliverClaimed(
  claimed: ClaimedPayload,
  context: DeliveryContext,
  progress?: AttemptProgress,
): Promise<AttemptResult | null> {
  const webhook = context.webhook(claimed.webhookId);
  if (!sendsTo(webhook)) {
    // A reload disabled or paused it after the database chose the payload: put it back as it was.
    await releaseClaimed(claimed, context);
    return null;
  }
  const attempt = startAttemptSpan(context.pool, claimed);
  let result: AttemptResult | null = null;
  try {
    result = await attemptTraced(claimed, context, webhook, attempt, progress);
    return result;
  } finally {
    endAttemptSpan(attempt, result);
  }
}

/** deliverClaimed's attempt, within its span. */
async function attemptTraced(
  claimed: ClaimedPayload,
  context: DeliveryContext,
  webhook: DeliveryWebhook,
  attempt: AttemptSpan,
  progress: AttemptProgress | undefined,
): Promise<AttemptResult> {
  const post = await send(context, webhook, claimed, attempt.traceparent);
  if (post.kind === 'response' && (post.statusCode === 401 || post.statusCode === 403)) {
    // A key may have been rotated: read it again on the next attempt.
    if (webhook.apikey) context.secrets.invalidate(webhook.apikey);
    if (webhook.signing) context.secrets.invalidate(webhook.signing.secret);
  }
  const settings = context.settings();
  const classification = classifyResponse(post, settings.retryStatusCodes, settings.disableOnGone);
  progress?.answered(receiverFailed(classification) === false);
  // Without retry.honorRetryAfter every retry follows delaysSeconds, as the specification says. The
  // header is read as a delay from the answer's arrival: the retry's time is the database's to set.
  const answeredAt = new Date();
  const retryAfter =
    settings.honorRetryAfter === true && post.kind === 'response' ? parseRetryAfter(post.retryAfter, answeredAt) : null;
  // From here its result goes to be written: once written, it no longer counts in the database.
  progress?.writing();
  const { result, applied } = await settleAttempt(
    context,
    claimed,
    describe(post),
    classification,
    retryAfter === null ? null : retryAfter.getTime() - answeredAt.getTime(),
  );
  logAttempt(context, claimed, webhook.id, result, applied, attempt.traceId);
  context.onAttempt?.(webhook.id, result);
  return result;
}

/**
 * Gives back a claimed attempt that will not be made (its webhook no longer
 * sends, or a standby nobody sent): the payload goes back to its queue as it was. Written like a result: while
 * the database is away it is tried again, because until it is written the
 * payload holds one of its webhook's slots.
 */
export async function releaseClaimed(claimed: ClaimedPayload, context: DeliveryContext): Promise<void> {
  await untilWritten(context, claimed, () => abandonAttempt(context.pool, claimed));
}

/**
 * Decides an attempt's next state by the retry policy and writes it with the
 * attempt's result: the one path of every attempt outcome, crash recovery's
 * `interrupted` included. The database applies the delivery window by its
 * own clock as it writes (a retry past the window's end is `expired`).
 * `retryAfterMs`: how long the response's Retry-After asked to wait. Returns
 * the result as recorded.
 */
export async function settleAttempt(
  context: DeliveryContext,
  payload: Pick<ClaimedPayload, 'payloadId' | 'series' | 'attemptNo' | 'webhookId'>,
  result: Omit<AttemptResult, 'outcome'>,
  classification: Classification,
  retryAfterMs: number | null = null,
): Promise<{ result: AttemptResult; applied: boolean }> {
  const settings = context.settings();
  // Attempts that failed for want of this process's resources are no failure of the receiver's: they do not count.
  const uncounted =
    classification === 'retryable' && payload.attemptNo > 1
      ? await untilWritten(context, payload, () => localFaultsBefore(context.pool, payload, payload.attemptNo))
      : 0;
  const next = nextState({
    classification,
    attemptsMade: Math.max(1, payload.attemptNo - uncounted),
    delaysSeconds: settings.delaysSeconds,
    retryAfterMs,
  });
  const outcome: AttemptResult['outcome'] = outcomeOf(next);
  const request: SettleRequest = {
    payload,
    attemptNo: payload.attemptNo,
    result: { ...result, outcome },
    retryInMs: next.kind === 'retry' ? next.inMs : null,
    windowSeconds: settings.deadLetterAfterSeconds,
    receiverFailed: receiverFailed(classification),
    holdWebhookForMs: next.kind === 'retry' ? (next.holdWebhookForMs ?? null) : null,
  };
  const settled = await untilWritten(context, payload, () => context.completer.settle(request));
  // Superseded (an operator's redelivery, another process's recovery): the result is kept as a plain failed try.
  if (!settled.applied) return { result: { ...result, outcome: 'retry' }, applied: false };
  // The outcome as written: a retry the database found past the window's end is `expired`.
  return { result: { ...result, outcome: settled.expired === true ? 'expired' : outcome }, applied: true };
}

/**
 * Writes what a receiver already answered (or reads what deciding it needs).
 * While the database cannot be reached (every way a connection fails, this
 * process out of descriptors to open one: see isTransientWriteError), or the
 * write lost a deadlock or serialisation conflict, the result stays in
 * memory and the write is tried again, with pauses growing to five seconds,
 * for as long as the process runs: crash recovery leaves an attempt alone
 * while its process holds its lease, so a result written late is never raced
 * by a second send. Once the service is stopping it has ten more seconds;
 * then the attempt stays unfinished, and recovery closes it as interrupted
 * once this process is gone.
 */
async function untilWritten<T>(
  context: DeliveryContext,
  about: { payloadId: number; webhookId: string },
  write: () => Promise<T>,
): Promise<T> {
  // Named, not spread: callers pass the claimed payload, whose body must not reach the log.
  const fields = { payloadId: about.payloadId, webhookId: about.webhookId };
  let stopSeen: number | undefined;
  for (let retry = 0; ; retry += 1) {
    try {
      const written = await write();
      if (retry > 0)
        context.logger.info(
          { ...fields, retries: retry },
          'recorded a delivery attempt once the database answered again',
        );
      return written;
    } catch (error) {
      const now = performance.now();
      if (context.stopping?.aborted === true) stopSeen ??= now;
      if (!isTransientWriteError(error) || (stopSeen !== undefined && now - stopSeen >= 10_000)) throw error;
      if (retry === 0)
        context.logger.warn(
          { ...fields, err: describeError(error) },
          'could not record a delivery attempt: the database is unreachable; trying again',
        );
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** retry, 5000)));
    }
  }
}

/** Whether attempts may start for the webhook: configured, enabled and not paused. */
function sendsTo(webhook: DeliveryWebhook | undefined): webhook is DeliveryWebhook {
  return webhook !== undefined && webhook.enabled && webhook.paused !== true;
}

/**
 * Resolves the API key and the signing keys, signs and posts; a secret that
 * cannot be resolved, or signing keys that are malformed, fail this attempt as
 * retryable. Never throws: running out of file descriptors or memory on the
 * way is a `local_fault`, anything else unforeseen `other`.
 */
async function send(
  context: DeliveryContext,
  webhook: DeliveryWebhook,
  payload: Pick<ClaimedPayload, 'payloadId' | 'body'>,
  traceparent: string | null,
): Promise<PostResult> {
  const { body } = payload;
  const headers: Record<string, string> = { ...webhook.headers };
  if (traceparent !== null) {
    // The attempt's own context replaces a configured one, whatever its case.
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'traceparent') delete headers[name];
    headers.traceparent = traceparent;
  }
  try {
    if (webhook.apikey) headers['X-API-Key'] = await context.secrets.resolve(webhook.apikey);
    if (webhook.signing)
      Object.assign(
        headers,
        await signedHeaders(
          context.secrets,
          webhook.signing.secret,
          webhookMessageId(context.installationId, payload.payloadId),
          body,
        ),
      );
  } catch (error) {
    return {
      kind: 'error',
      errorClass: isLocalFault(error) ? 'local_fault' : 'secret_unavailable',
      message: storableMessage(error instanceof Error ? error.message : String(error)),
      durationMs: 0,
    };
  }
  try {
    return await context.sender.post({ url: webhook.url, body, headers });
  } catch (error) {
    // Only the error's name and code: its message is not the sender's, which alone scrubs header values from what it records.
    const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
    return {
      kind: 'error',
      errorClass: isLocalFault(error) ? 'local_fault' : 'other',
      message: storableMessage(
        `the request could not be made: ${String(name ?? 'error')} ${String(code ?? '')}`.trim(),
      ),
      durationMs: 0,
    };
  }
}

function describe(post: PostResult): Omit<AttemptResult, 'outcome'> {
  return post.kind === 'response'
    ? {
        durationMs: Math.round(post.durationMs),
        statusCode: post.statusCode,
        errorClass: null,
        errorMessage: null,
        responseExcerpt: post.responseExcerpt,
      }
    : {
        durationMs: Math.round(post.durationMs),
        statusCode: null,
        errorClass: post.errorClass,
        errorMessage: post.message,
        responseExcerpt: null,
      };
}
