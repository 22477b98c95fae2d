import type pg from 'pg';
import type { Logger } from 'pino';
import type { WebhookConfig } from '../config/schema.js';
import { checksDigest, reconcile, type ReconcileResult } from './reconcile.js';
import { reconcileLockName } from './reconcile-store.js';

/** graphile-worker's task name for a reconcile the service starts by itself. */
export const RECONCILE_TASK = 'reconcile';

/**
 * The mirror webhooks whose set a reload changed: enabled mirror webhooks
 * of `next` that were mirror webhooks of `previous` with other resource
 * types, parent rule or filters (checksDigest). A new mirror webhook, or one
 * that becomes a mirror, is not among them: `reconcile` sends it its
 * initial set when an operator asks (docs/mirror.md).
 */
export function changedMirrors(previous: readonly WebhookConfig[], next: readonly WebhookConfig[]): string[] {
  const before = new Map(previous.map((webhook) => [webhook.id, webhook]));
  return next.flatMap((webhook) => {
    const old = before.get(webhook.id);
    if (!webhook.enabled || !webhook.mirror || old === undefined || !old.mirror) return [];
    return checksDigest(old) === checksDigest(webhook) ? [] : [webhook.id];
  });
}

/** Who a reconcile the service starts is recorded as requested by: `run ` and the process id. */
export const SERVICE_REQUESTER_PREFIX = 'run ';

/**
 * Queues a reconcile of each webhook: one waiting job per webhook (a second
 * request while one waits replaces it). Reconciles of one webhook run one at
 * a time by a session lock (see reconcile), not by a graphile-worker named
 * queue, which a worker that dies keeps locked for hours.
 */
export async function queueReconciles(pool: pg.Pool, webhookIds: readonly string[]): Promise<void> {
  for (const id of webhookIds) {
    await pool.query(
      `select graphile_worker.add_job($1, json_build_object('webhookId', $2::text), job_key := $3, max_attempts := 10)`,
      [RECONCILE_TASK, id, `asset_webhooks_reconcile:${id}`],
    );
  }
}

/**
 * Queues again the reconciles the service started that no process is
 * running any more (their process died: the job it held stays locked for
 * hours), so that they resume. Run by maintenance, every minute. A
 * reconcile an operator started and interrupted is left to the operator.
 * Returns the webhooks queued.
 */
export async function requeueOrphanedReconciles(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ webhook_id: string }>(
    `select r.webhook_id from asset_webhooks.reconciles r
     where r.status = 'running' and r.requested_by like $1 || '%'
       and not asset_webhooks.session_lock_held($2 || r.webhook_id)`,
    [SERVICE_REQUESTER_PREFIX, reconcileLockName('')],
  );
  const ids = rows.map((row) => row.webhook_id);
  await queueReconciles(pool, ids);
  return ids;
}

/**
 * The task: reconciles the webhook as the process's configuration has it
 * now, or does nothing when it is no longer an enabled mirror webhook.
 */
export async function runQueuedReconcile(options: {
  readonly pool: pg.Pool;
  readonly logger: Logger;
  readonly webhooks: readonly WebhookConfig[];
  readonly maxPayloadBytes: number;
  readonly requestedBy: string;
  readonly payload: unknown;
}): Promise<ReconcileResult | null> {
  const id = (options.payload as { webhookId?: unknown } | null)?.webhookId;
  const webhook = options.webhooks.find((candidate) => candidate.id === id);
  const logger = options.logger.child({ webhook: id });
  if (webhook === undefined || !webhook.mirror || !webhook.enabled) {
    logger.info('reconcile not run: the webhook is no longer an enabled mirror webhook in this configuration');
    return null;
  }
  logger.info("reconcile started: the webhook's filters changed");
  const result = await reconcile({
    pool: options.pool,
    webhook,
    maxPayloadBytes: options.maxPayloadBytes,
    requestedBy: options.requestedBy,
    waitForOther: true,
  });
  logger.info(
    {
      reconcileId: result.reconcileId,
      assetsRead: result.assetsRead,
      edited: result.editedSent,
      unmatched: result.unmatchedSent,
      payloads: result.payloads,
    },
    'reconcile completed',
  );
  return result;
}
