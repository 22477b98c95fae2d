import { readWebhookState } from '../investigate/webhook-state.js';
import { runSweep } from '../sweep/sweep.js';
import { ReplayJob } from './replay-job.js';
import type { ReplayOptions, ReplayResult } from './replay-options.js';

export type { ReplayOptions, ReplayProgress, ReplayResult } from './replay-options.js';
export { REPLAY_EVENT_TYPES, type ReplaySelection } from './selection.js';

/** Runs a replay (see ReplayOptions) to its end or to the stop signal. */
export async function replay(options: ReplayOptions): Promise<ReplayResult> {
  const job = new ReplayJob(options);
  const outcome = await runSweep(options, job);
  return {
    ...job.progress(),
    webhookId: job.webhookId,
    movedTo: job.target,
    ...outcome,
    webhookState: await readWebhookState(options.pool, job.target ?? job.webhookId),
  };
}
