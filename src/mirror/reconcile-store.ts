import type pg from 'pg';
import { sweepLockName } from '../sweep/lock.js';
import type { SweepRecord } from '../sweep/record.js';

/** A reconcile's progress: its totals over every run of it, and its keyset position. */
export interface ReconcileTotals {
  readonly reconcileId: number | null;
  readonly phase: 'assets' | 'gone';
  readonly assetsRead: number;
  readonly editedSent: number;
  readonly unmatchedSent: number;
  readonly payloads: number;
  /** Within the phase, every asset up to this id is done. */
  readonly lastAssetId: string | null;
}

/** A new reconcile's totals; a dry run with nothing running starts from them too. */
export const NO_PROGRESS: ReconcileTotals = {
  reconcileId: null,
  phase: 'assets',
  assetsRead: 0,
  editedSent: 0,
  unmatchedSent: 0,
  payloads: 0,
  lastAssetId: null,
};

interface ReconcileRow {
  reconcile_id: number;
  checks_digest: string;
  phase: 'assets' | 'gone';
  last_asset_id: string | null;
  assets_read: string;
  edited_sent: string;
  unmatched_sent: string;
  payloads: string;
}

const ROW_COLUMNS = `reconcile_id, checks_digest, phase, last_asset_id::text as last_asset_id,
  assets_read, edited_sent, unmatched_sent, payloads`;

function totalsOf(row: ReconcileRow): ReconcileTotals {
  return {
    reconcileId: row.reconcile_id,
    phase: row.phase,
    assetsRead: Number(row.assets_read),
    editedSent: Number(row.edited_sent),
    unmatchedSent: Number(row.unmatched_sent),
    payloads: Number(row.payloads),
    lastAssetId: row.last_asset_id,
  };
}

/** The session lock (asset_webhooks.session_locks) a reconcile of the webhook holds. */
export function reconcileLockName(webhookId: string): string {
  return sweepLockName('reconcile', webhookId);
}

/** The columns a reconcile's chunk sets (recordSweepChunk). */
export const RECONCILE_RECORD: SweepRecord = {
  kind: 'reconcile',
  columns: {
    phase: 'text',
    last_asset_id: 'bigint',
    assets_read: 'bigint',
    edited_sent: 'bigint',
    unmatched_sent: 'bigint',
    payloads: 'bigint',
  },
};

/**
 * The webhook's unfinished reconcile, or a new one (unless `dryRun`, which
 * starts nothing), read under the webhook's reconcile lock. One whose
 * position was reached under other checks (`digest`) starts over: the set
 * keeps what is done from being sent again.
 */
export async function startOrResumeReconcile(
  session: pg.PoolClient,
  webhookId: string,
  digest: string,
  requestedBy: string,
  dryRun: boolean,
): Promise<{ totals: ReconcileTotals; resumed: boolean }> {
  const {
    rows: [found],
  } = await session.query<ReconcileRow>(
    `select ${ROW_COLUMNS} from asset_webhooks.reconciles where webhook_id = $1 and status = 'running'`,
    [webhookId],
  );
  if (dryRun) return { totals: found === undefined ? NO_PROGRESS : totalsOf(found), resumed: found !== undefined };
  if (found !== undefined && found.checks_digest !== digest) {
    const {
      rows: [restarted],
    } = await session.query<ReconcileRow>(
      `update asset_webhooks.reconciles set checks_digest = $2, phase = 'assets', last_asset_id = null, updated_at = clock_timestamp()
       where reconcile_id = $1 returning ${ROW_COLUMNS}`,
      [found.reconcile_id, digest],
    );
    return { totals: totalsOf(restarted!), resumed: true };
  }
  if (found !== undefined) return { totals: totalsOf(found), resumed: true };
  const {
    rows: [created],
  } = await session.query<ReconcileRow>(
    `insert into asset_webhooks.reconciles (webhook_id, checks_digest, requested_by) values ($1, $2, $3)
     returning ${ROW_COLUMNS}`,
    [webhookId, digest, requestedBy],
  );
  return { totals: totalsOf(created!), resumed: false };
}
