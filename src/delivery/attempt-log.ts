import type { AttemptResult, ClaimedPayload } from './attempt-store.js';
import type { DeliveryContext } from './context.js';

/** One line per attempt: delivered at info, anything else at warn, with what happens next. */
export function logAttempt(
  context: DeliveryContext,
  claimed: ClaimedPayload,
  webhookId: string,
  result: AttemptResult,
  applied: boolean,
  traceId: string | null,
): void {
  const log = {
    ...(traceId === null ? {} : { trace_id: traceId }),
    payloadId: claimed.payloadId,
    attempt: claimed.attemptNo,
    webhookId,
    statusCode: result.statusCode,
    errorClass: result.errorClass,
    outcome: result.outcome,
    durationMs: result.durationMs,
  };
  if (!applied) {
    context.logger.warn(
      log,
      'attempt recorded, but the payload had moved on meanwhile (handed back or redelivered): its result does not change the payload',
    );
  } else if (result.outcome === 'delivered') context.logger.info(log, 'payload delivered');
  else
    context.logger.warn(
      log,
      result.outcome === 'retry'
        ? 'delivery attempt failed; will retry'
        : result.outcome === 'suspended'
          ? 'receiver answered 410 Gone: webhook suspended, its payloads wait until `asset-webhooks resume --webhook ID` or a new url'
          : 'payload dead-lettered',
    );
}
