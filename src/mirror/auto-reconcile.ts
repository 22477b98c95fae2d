import type pg from 'pg';
import type { Logger } from 'pino';
import type { WebhookConfig } from '../config/schema.js';
import { checksDigest, reconcile, type ReconcileResult } from './reconcile.js';
import { reconcileLockName } from './reconcile-store.js';
import { seedFromHistory } from './seed.js';

/** graphile-worker's task name for a reconcile the service starts by itself. */
export const RECONCILE_TASK = 'reconcile';

/** What a reload changed of a mirror webhook that decides its set, as a reconcile's log names it. */
export type ChangedCheck = 'resource types' | 'event types' | 'parent rule' | 'filters';

/** The change of a webhook that was plain and is now a mirror one: its set is seeded first (seedFromHistory). */
export const MIRROR_SWITCHED_ON = 'mirror switched on';

/** A mirror webhook whose set a reload changed, and what changed. */
export interface ChangedMirror {
  readonly webhookId: string;
  /** In the order of ChangedCheck, or MIRROR_SWITCHED_ON alone; empty: a reconcile resumed after its process died. */
  readonly changed: ReadonlyArray<ChangedCheck | typeof MIRROR_SWITCHED_ON>;
}

type Checks = Pick<WebhookConfig, 'resourceTypes' | 'eventTypes' | 'filters'>;

const json = (value: unknown): string => JSON.stringify(value);
/** The parent rule is the webhook's parentId filters (CONTRACT 3: one replaces the top-level-only check). */
const parentRule = (webhook: Checks) => webhook.filters.filter((filter) => filter.filterKind === 'parentId');
const otherFilters = (webhook: Checks) => webhook.filters.filter((filter) => filter.filterKind !== 'parentId');

/** What differs between two webhooks' checks (the parts of checksDigest), empty when nothing does. */
export function changedChecks(before: Checks, after: Checks): ChangedCheck[] {
  const parts: ReadonlyArray<readonly [ChangedCheck, (webhook: Checks) => unknown]> = [
    ['resource types', (webhook) => webhook.resourceTypes],
    ['event types', (webhook) => webhook.eventTypes],
    ['parent rule', parentRule],
    ['filters', otherFilters],
  ];
  return parts.flatMap(([name, part]) => (json(part(before)) === json(part(after)) ? [] : [name]));
}

/**
 * The mirror webhooks whose set a reload changed: enabled mirror webhooks
 * of `next` that were mirror webhooks of `previous` with other resource
 * types, event types, parent rule or filters (checksDigest), each with what
 * changed, and those that were plain webhooks of `previous` (their set is
 * seeded from their delivery history, then reconciled). A new webhook is not
 * among them: it has no history, and `reconcile` sends it its initial set
 * when an operator asks (docs/mirror.md).
 */
export function changedMirrors(previous: readonly WebhookConfig[], next: readonly WebhookConfig[]): ChangedMirror[] {
  const before = new Map(previous.map((webhook) => [webhook.id, webhook]));
  return next.flatMap((webhook): ChangedMirror[] => {
    const old = before.get(webhook.id);
    if (!webhook.enabled || !webhook.mirror || old === undefined) return [];
    if (!old.mirror) return [{ webhookId: webhook.id, changed: [MIRROR_SWITCHED_ON] }];
    if (checksDigest(old) === checksDigest(webhook)) return [];
    return [{ webhookId: webhook.id, changed: changedChecks(old, webhook) }];
  });
}

/**
 * The enabled mirror webhooks of a document a process starts with whose
 * newest routing has them plain: `mirror: true` was set while no process ran
 * with it, or in a restart rather than a reload. A webhook no routing names
 * is new (no history). Other processes that reload or start with the same
 * document may find them too; one job per webhook runs.
 */
export async function switchedOnAtStart(pool: pg.Pool, webhooks: readonly WebhookConfig[]): Promise<ChangedMirror[]> {
  const ids = webhooks.filter((webhook) => webhook.enabled && webhook.mirror).map((webhook) => webhook.id);
  if (ids.length === 0) return [];
  const { rows } = await pool.query<{ webhook_id: string }>(
    `select c.id as webhook_id from unnest($1::text[]) as c(id)
     cross join lateral (
       select coalesce((w.definition ->> 'mirror')::boolean, false) as mirror
       from asset_webhooks.routing_webhooks w join asset_webhooks.routings r on r.routing_id = w.routing_id
       where w.webhook_id = c.id
       order by r.last_used_at desc, r.routing_id desc limit 1) newest
     where not newest.mirror`,
    [ids],
  );
  return rows.map((row) => ({ webhookId: row.webhook_id, changed: [MIRROR_SWITCHED_ON] }));
}

/**
 * Why a reconcile runs, as its log lines say it: the checks that changed, or
 * that mirror was switched on, or (`changed` empty) that it resumes; null: a
 * job queued by an older release, which did not say.
 */
export function reconcileReason(changed: readonly string[] | null): string {
  if (changed === null) return "the webhook's checks changed";
  if (changed.length === 0) return 'resuming a reconcile whose process stopped';
  if (changed.includes(MIRROR_SWITCHED_ON)) return 'mirror: true was set on the webhook';
  const list = changed.length === 1 ? changed[0]! : `${changed.slice(0, -1).join(', ')} and ${changed.at(-1)!}`;
  return `the webhook's ${list} changed`;
}

/** Who a reconcile the service starts is recorded as requested by: `run ` and the process id. */
export const SERVICE_REQUESTER_PREFIX = 'run ';

/**
 * Queues a reconcile of each webhook: one waiting job per webhook (a second
 * request while one waits replaces it, with its change). Reconciles of one
 * webhook run one at a time by a session lock (see reconcile), not by a
 * graphile-worker named queue, which a worker that dies keeps locked for
 * hours. `changed` empty: a reconcile resumed after its process died.
 */
export async function queueReconciles(pool: pg.Pool, requests: readonly ChangedMirror[]): Promise<void> {
  for (const { webhookId, changed } of requests) {
    await pool.query(
      `select graphile_worker.add_job($1, json_build_object('webhookId', $2::text, 'changed', $3::text[]), job_key := $4, max_attempts := 10)`,
      [RECONCILE_TASK, webhookId, changed, `asset_webhooks_reconcile:${webhookId}`],
    );
  }
}

/** Queues a reconcile of each webhook, then logs each with what started it (`reconcile queued: …`). */
export async function queueAndLogReconciles(
  pool: pg.Pool,
  requests: readonly ChangedMirror[],
  logger: Logger,
): Promise<void> {
  await queueReconciles(pool, requests);
  for (const { webhookId, changed } of requests)
    logger.info({ webhook: webhookId, changed }, `reconcile queued: ${reconcileReason(changed)}`);
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
  await queueReconciles(
    pool,
    ids.map((webhookId) => ({ webhookId, changed: [] })),
  );
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
  const payload = options.payload as { webhookId?: unknown; changed?: unknown } | null;
  const id = payload?.webhookId;
  const webhook = options.webhooks.find((candidate) => candidate.id === id);
  const logger = options.logger.child({ webhook: id });
  if (webhook === undefined || !webhook.mirror || !webhook.enabled) {
    logger.info('reconcile not run: the webhook is no longer an enabled mirror webhook in this configuration');
    return null;
  }
  // A job queued by an older release carries no `changed`.
  const changed = Array.isArray(payload?.changed) ? payload.changed.map(String) : null;
  if (changed?.includes(MIRROR_SWITCHED_ON) === true) {
    // Before the reconcile, which then sends an UNMATCHED for each seeded asset that no longer passes,
    // and puts right those whose Trash state is not the one they were last sent.
    const seeded = await seedFromHistory(options.pool, webhook.id);
    logger.info({ seeded }, `mirror set seeded from the webhook's delivery history: ${seeded} assets`);
  }
  logger.info({ changed }, `reconcile started: ${reconcileReason(changed)}`);
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
