import type { TaskList } from 'graphile-worker';
import type { Logger } from 'pino';
import type pg from 'pg';
import { coalesce } from '../coalesce/run.js';
import { recordTickOutcome } from '../coalesce/schedule.js';
import { describeError } from '../db/connect.js';
import { runMaintenance } from '../maintenance/maintenance.js';
import { RECONCILE_TASK, requeueOrphanedReconciles, runQueuedReconcile } from '../mirror/auto-reconcile.js';
import type { ServiceMetrics } from './metrics.js';
import { ROUTING_FEATURES } from './routing-features.js';
import { syncWebhooks, type ServiceState } from './service-state.js';

type Recorder = Parameters<typeof syncWebhooks>[2];

/** What the tasks run with. */
export interface TaskOptions {
  readonly pool: pg.Pool;
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  readonly state: () => ServiceState;
  readonly recorder: Recorder;
  /** Called after each coalescing run: the payloads it wrote are ready to send. */
  readonly payloadsWritten: () => void;
  /** Who a reconcile this process starts is recorded as requested by. */
  readonly processName: string;
}

/**
 * graphile-worker's tasks: a coalescing run (scheduled by the ticker),
 * maintenance (its crontab) and a mirror webhook's reconcile (queued by a reload).
 */
export function serviceTasks(options: TaskOptions): TaskList {
  return {
    coalesce: (payload) => coalesceTask(options, payload),
    [RECONCILE_TASK]: (payload) => reconcileTask(options, payload),
    maintenance: () => maintenanceTask(options),
  };
}

/** A coalescing run, by the configuration this process records before it routes. */
async function coalesceTask(options: TaskOptions, payload: unknown): Promise<void> {
  const { pool, logger, metrics } = options;
  // The run routes by this process's configuration, and delivery sends only
  // to webhooks the table says are enabled: the two must agree. Another
  // `run` process with a different configuration (a rolling change, a
  // SIGHUP that missed one) writes its own at start and reload, and would
  // otherwise leave webhooks routed here but never sent, or the reverse.
  // Under the coalescing lock: a run of another process cannot rewrite them while this one routes.
  const current = options.state();
  // The configuration in use once the run holds the coalescing lock: see CoalesceOptions.webhooks.
  let locked = current;
  const beforeRun = async (): Promise<void> => {
    locked = options.state();
    const restored = await syncWebhooks(pool, locked.config, options.recorder);
    if (restored.length > 0) {
      logger.warn(
        { webhooks: restored },
        "asset_webhooks.webhooks differed from this process's configuration, as another run process with a different configuration writes it; restored before coalescing",
      );
    }
  };
  const slot = tickSlot(payload);
  try {
    const result = await coalesce({
      pool,
      webhooks: () => locked.routed,
      maxPayloadBytes: current.settings.maxPayloadBytes,
      logger,
      beforeRun,
      features: ROUTING_FEATURES,
    });
    metrics.recordRun(result);
    options.payloadsWritten();
    if (slot !== null) await recordTickOutcome(pool, slot, null).catch(() => {});
  } catch (error) {
    if (slot !== null) await recordTickOutcome(pool, slot, describeError(error)).catch(() => {});
    throw error;
  }
}

/** A mirror webhook's reconcile, queued by a reload; a failure is retried by graphile-worker. */
async function reconcileTask(options: TaskOptions, payload: unknown): Promise<void> {
  const { pool, logger, metrics } = options;
  const current = options.state();
  try {
    const result = await runQueuedReconcile({
      pool,
      logger,
      webhooks: current.settings.webhooks,
      maxPayloadBytes: current.settings.maxPayloadBytes,
      requestedBy: options.processName,
      payload,
    });
    if (result !== null) metrics.recordReconcile(result);
  } catch (error) {
    metrics.reconciles.inc({ webhook: String((payload as { webhookId?: unknown }).webhookId), outcome: 'failed' });
    logger.error({ err: describeError(error) }, 'reconcile failed; graphile-worker tries it again');
    throw error;
  }
}

/** Retention and the long-transaction warning, then the service's reconciles whose process is gone, queued again. */
async function maintenanceTask(options: TaskOptions): Promise<void> {
  const { pool, logger } = options;
  await runMaintenance({ pool, retentionDays: options.state().settings.retentionDays, logger });
  const requeued = await requeueOrphanedReconciles(pool);
  if (requeued.length > 0)
    logger.warn({ webhooks: requeued }, 'reconcile queued again: the process that ran it is gone');
}

/** The slot of a coalesce job's payload (see tick()), or null for a job added otherwise. */
function tickSlot(payload: unknown): number | null {
  const slot = (payload as { slot?: unknown } | null)?.slot;
  return typeof slot === 'number' && Number.isInteger(slot) ? slot : null;
}
