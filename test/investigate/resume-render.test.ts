import { expect, it } from 'vitest';
import { renderResume, type ResumeReport } from '../../src/investigate/resume-gone.js';

// The one line `resume --webhook ID` prints for each outcome of
// asset_webhooks.resume_gone_webhook: suspended or not by a 410, and paused by
// its document or not. The e2e test (test/e2e/gone.test.ts) runs the command.
it.each<[string, ResumeReport, string]>([
  [
    'a suspension ended, nothing else holds it',
    { webhookId: 'crm', wasGone: true, resumed: true, waiting: 30 },
    'webhook crm resumed after its 410 Gone suspension: its 30 payloads are sent again, in order',
  ],
  [
    'a suspension ended, one payload',
    { webhookId: 'crm', wasGone: true, resumed: true, waiting: 1 },
    'webhook crm resumed after its 410 Gone suspension: its 1 payload is sent again, in order',
  ],
  [
    'a suspension ended, its document still pauses it',
    { webhookId: 'crm', wasGone: true, resumed: false, waiting: 4 },
    'webhook crm: its 410 Gone suspension is ended, but its document still pauses it (paused: true): ' +
      'its 4 payloads wait until paused is false again (then SIGHUP)',
  ],
  [
    'not suspended',
    { webhookId: 'crm', wasGone: false, resumed: true, waiting: 0 },
    'webhook crm was not suspended by a 410 Gone answer: nothing to resume (0 payloads waiting)',
  ],
  [
    'a suspension ended, its document still pauses it, one payload',
    { webhookId: 'crm', wasGone: true, resumed: false, waiting: 1 },
    'webhook crm: its 410 Gone suspension is ended, but its document still pauses it (paused: true): ' +
      'its 1 payload waits until paused is false again (then SIGHUP)',
  ],
  [
    'not suspended, paused by its document',
    { webhookId: 'crm', wasGone: false, resumed: false, waiting: 2 },
    'webhook crm was not suspended by a 410 Gone answer; its document pauses it (paused: true): ' +
      'its 2 payloads wait until paused is false again (then SIGHUP)',
  ],
])('%s', (_case, report, line) => {
  expect(renderResume(report)).toBe(line);
});
