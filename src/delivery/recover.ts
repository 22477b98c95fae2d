import type { DeliveryContext } from './context.js';
import { settleAttempt } from './deliver.js';
import { abandonAttempt } from './attempt-store.js';
import { expiredPayloads, orphanedAttempts } from './recovery-reads.js';

/**
 * How long this process holds its own lease before it takes other processes
 * for dead. After the database comes back from an outage every lease is free
 * until its process takes it again (within seconds: see
 * src/service/process-lease.ts); a process that has held its own for this
 * long has given every live one that time.
 */
export const OWN_LEASE_SETTLE_MS = 15_000;

/**
 * An attempt that names no process (started by a session named otherwise)
 * is closed this long after it started: no live process's request lasts it.
 */
export const NAMELESS_ATTEMPT_AFTER_SECONDS = 600;

/**
 * How long after its start an attempt whose process is gone is closed: the
 * request timeout plus five seconds (a live process whose lease was lost for
 * a moment has finished its request by then), or null, closing nothing,
 * until this process has held its own lease for OWN_LEASE_SETTLE_MS.
 */
export function processGoneGrace(ownLeaseHeldForMs: number, requestTimeoutSeconds: number): number | null {
  return ownLeaseHeldForMs >= OWN_LEASE_SETTLE_MS ? requestTimeoutSeconds + 5 : null;
}

/**
 * Crash recovery: closes the attempts of processes that are gone (SIGKILL,
 * an OOM kill, a machine lost) as interrupted, through the one settle path,
 * so their payloads are sent again at once and their webhooks' slots are
 * free. A standby the process never reported sent is given back to its queue
 * instead, its attempt undone: a request that never left its process uses
 * none of the payload's retries. Every `run` process does this every few
 * seconds. Returns how many attempts it closed or undid.
 */
export async function recoverOrphans(context: DeliveryContext, ownLeaseHeldForMs: number): Promise<number> {
  const grace = processGoneGrace(ownLeaseHeldForMs, context.settings().requestTimeoutSeconds);
  const orphans = await orphanedAttempts(context.pool, grace, NAMELESS_ATTEMPT_AFTER_SECONDS);
  let closed = 0;
  let undone = 0;
  for (const orphan of orphans) {
    if (!orphan.sent) {
      await abandonAttempt(context.pool, orphan);
      undone += 1;
      continue;
    }
    const { applied } = await settleAttempt(
      context,
      orphan,
      {
        durationMs: null,
        statusCode: null,
        errorClass: 'interrupted',
        errorMessage: 'the process that made the attempt stopped before it recorded the result',
        responseExcerpt: null,
      },
      'interrupted',
    );
    if (applied) closed += 1;
  }
  if (closed > 0)
    context.logger.warn(
      { attempts: closed },
      'attempts of a process that is gone were closed as interrupted; their payloads are sent again',
    );
  if (undone > 0)
    context.logger.warn(
      { payloads: undone },
      'standby payloads a process that is gone had claimed and never sent were given back to their queues',
    );
  return closed + undone;
}

/**
 * The expiry sweep: payloads that waited past retry.deadLetterAfterSeconds
 * without being in flight (a disabled webhook, a queue behind a stuck head,
 * a retry the window ran out before) are dead-lettered as `expired`, through
 * the one settle path. Returns how many.
 */
export async function expireWaiting(context: DeliveryContext): Promise<number> {
  let expired = 0;
  for (;;) {
    const due = await expiredPayloads(context.pool, context.settings().deadLetterAfterSeconds, 500);
    if (due.length === 0) break;
    const answers = await Promise.all(
      due.map((payload) =>
        context.completer.settle({
          payload,
          attemptNo: null,
          retryInMs: null,
          windowSeconds: null,
          receiverFailed: null,
          holdWebhookForMs: null,
          result: {
            durationMs: null,
            statusCode: null,
            errorClass: null,
            errorMessage: null,
            responseExcerpt: null,
            outcome: 'expired',
          },
        }),
      ),
    );
    const applied = answers.filter((answer) => answer.applied).length;
    expired += applied;
    if (applied === 0) break;
  }
  if (expired > 0) context.logger.warn({ payloads: expired }, 'waiting payloads expired and were dead-lettered');
  return expired;
}
