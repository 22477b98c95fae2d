import type pg from 'pg';
import type { DeliveryContext } from './context.js';
import { settleAttempt } from './deliver.js';
import { abandonAttempt } from './attempt-store.js';
import { expiredPayloads, orphanedAttempts } from './recovery-reads.js';

/**
 * An attempt that names no process (started by a session named otherwise)
 * is closed this long after it started: no live process's request lasts it.
 */
export const NAMELESS_ATTEMPT_AFTER_SECONDS = 600;

/**
 * Crash recovery's grace as the process `processId` sees it
 * (asset_webhooks.process_gone_grace): the request timeout plus five
 * seconds once the process has held its own lease for 15 seconds by the
 * database's clock, else null, taking no process for gone.
 */
export async function processGoneGrace(
  pool: pg.Pool,
  processId: string,
  requestTimeoutSeconds: number,
): Promise<number | null> {
  const { rows } = await pool.query<{ grace: number | null }>({
    name: 'asset_webhooks.process_gone_grace',
    text: 'select asset_webhooks.process_gone_grace($1, $2) as grace',
    values: [processId, requestTimeoutSeconds],
  });
  return rows[0]?.grace ?? null;
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
export async function recoverOrphans(context: DeliveryContext, graceSeconds: number | null): Promise<number> {
  const orphans = await orphanedAttempts(context.pool, graceSeconds, NAMELESS_ATTEMPT_AFTER_SECONDS);
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
