import type pg from 'pg';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { resumeGoneWebhook, type GoneResume } from '../lifecycle/transitions.js';
import { assertKnownWebhook } from './known-webhook.js';

/** What `resume --webhook ID` did, for its output. */
export interface ResumeReport extends GoneResume {
  readonly webhookId: string;
}

/**
 * `resume --webhook ID`: ends the suspension of a webhook by a 410 Gone answer
 * (retry.disableOnGone), through asset_webhooks.resume_gone_webhook. Unless
 * its document pauses it, its waiting payloads, the one that got the 410
 * first among them, are sent again in order, their windows moved forward by
 * the time held; the pumps of running processes are woken. A webhook no 410
 * holds is left as it is. Refuses an id the service has never run with.
 */
export async function resumeWebhook(pool: pg.Pool, webhookId: string): Promise<ResumeReport> {
  await assertKnownWebhook(pool, webhookId);
  const resumed = await resumeGoneWebhook(pool, webhookId);
  // Known a moment ago: only a concurrent cleanup of the webhooks table takes it away.
  if (resumed === null) throw new Error(`asset_webhooks.resume_gone_webhook: no row for webhook ${webhookId}`);
  // Best effort: every pump claims on its own timer too.
  if (resumed.wasGone && resumed.resumed) await announcePayloadsReady(pool).catch(() => {});
  return { webhookId, ...resumed };
}

/** One line saying what `resume --webhook ID` did. */
export function renderResume(report: ResumeReport): string {
  const { webhookId, waiting } = report;
  const payloads = `${waiting} payload${waiting === 1 ? '' : 's'}`;
  if (!report.wasGone) {
    return report.resumed
      ? `webhook ${webhookId} was not suspended by a 410 Gone answer: nothing to resume (${payloads} waiting)`
      : `webhook ${webhookId} was not suspended by a 410 Gone answer; its document pauses it (paused: true): ` +
          `its ${payloads} ${waiting === 1 ? 'waits' : 'wait'} until paused is false again (then SIGHUP)`;
  }
  return report.resumed
    ? `webhook ${webhookId} resumed after its 410 Gone suspension: its ${payloads} ${waiting === 1 ? 'is' : 'are'} sent again, in order`
    : `webhook ${webhookId}: its 410 Gone suspension is ended, but its document still pauses it (paused: true): ` +
        `its ${payloads} ${waiting === 1 ? 'waits' : 'wait'} until paused is false again (then SIGHUP)`;
}
