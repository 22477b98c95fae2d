import { runSweep } from '../sweep/sweep.js';
import { BackfillJob } from './backfill-job.js';
import type { BackfillOptions, BackfillResult } from './backfill-options.js';

export type { BackfillOptions, BackfillProgress, BackfillResult } from './backfill-options.js';

/** Runs a backfill (see BackfillOptions) to its end or to the stop signal. */
export async function backfill(options: BackfillOptions): Promise<BackfillResult> {
  const job = new BackfillJob(options);
  const outcome = await runSweep(options, job);
  return {
    ...job.progress(),
    webhookId: options.webhook.id,
    ...outcome,
    excludedBy: job.excludedBy,
    missing: job.missing.ids,
    missingCount: job.missing.count,
  };
}
