import type pg from 'pg';
import { eventually } from './receiver.js';

async function lastRunId(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    'select coalesce(max(run_id), 0) as n from asset_webhooks.coalesce_runs',
  );
  return Number(rows[0]!.n);
}

/**
 * Waits until two coalescing runs have begun since the call. A run routes by
 * the configuration its process held when the run's task began, and takes
 * every event committed before it reads its high-water mark: a run that began
 * just before a reload may still route events committed after it by the old
 * document. Runs take the coalescing lock one after another, and a run's row
 * is written once it holds the lock, so the second run begun after the call
 * began after the first had written its row: it routes by the configuration
 * in use at the call.
 */
export async function twoCoalescingRunsSince(pool: pg.Pool): Promise<void> {
  const from = await lastRunId(pool);
  await eventually(async () => ((await lastRunId(pool)) >= from + 2 ? true : undefined), {
    timeoutMs: 20_000,
    what: 'two coalescing runs begun since the reload',
  });
}
