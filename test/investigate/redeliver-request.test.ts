import { describe, expect, it } from 'vitest';
import { redeliverRequest } from '../../src/cli/commands/dead-letters-redeliver.js';

const from = new Date('2026-11-20T00:00:00Z');

describe('what `dead-letters redeliver` is asked, by its arguments', () => {
  it.each([
    ['PAYLOAD_ID alone: that payload', 5, {}, { kind: 'one', payloadId: 5 }],
    [
      'PAYLOAD_ID --to: --to names the webhook it moves to',
      5,
      { to: 'crm-v2' },
      { kind: 'moved', payloadId: 5, toWebhookId: 'crm-v2', option: '--to' },
    ],
    [
      'PAYLOAD_ID --to-webhook: the same as --to',
      5,
      { toWebhook: 'crm-v2' },
      { kind: 'moved', payloadId: 5, toWebhookId: 'crm-v2', option: '--to-webhook' },
    ],
    [
      '--webhook alone: every dead letter of it',
      undefined,
      { webhook: 'crm' },
      {
        kind: 'bulk',
        selection: { webhookId: 'crm', from: undefined, to: undefined, reason: undefined },
        moveTo: undefined,
        dryRun: false,
      },
    ],
    [
      '--webhook --to-webhook: every dead letter of it, moved to that webhook; --to still ends the window',
      undefined,
      { webhook: 'crm', to: '2026-11-21T00:00:00Z', reason: 'webhook_removed', toWebhook: 'crm-v2' },
      {
        kind: 'bulk',
        selection: {
          webhookId: 'crm',
          from: undefined,
          to: new Date('2026-11-21T00:00:00Z'),
          reason: 'webhook_removed',
        },
        moveTo: 'crm-v2',
        dryRun: false,
      },
    ],
    [
      '--webhook --to: --to is the end of the window',
      undefined,
      { webhook: 'crm', from, to: '2026-11-21T00:00:00+01:00', reason: 'expired', dryRun: true },
      {
        kind: 'bulk',
        selection: { webhookId: 'crm', from, to: new Date('2026-11-20T23:00:00Z'), reason: 'expired' },
        moveTo: undefined,
        dryRun: true,
      },
    ],
  ] as const)('%s', (_name, payloadId, options, expected) => {
    expect(redeliverRequest(payloadId, options)).toEqual(expected);
  });

  it.each([
    [undefined, {}, /got neither$/],
    [5, { webhook: 'crm' }, /^PAYLOAD_ID: expected either PAYLOAD_ID .* got both/],
    [5, { from }, /^--from: goes with --webhook ID/],
    [5, { reason: 'expired' }, /^--reason: goes with --webhook ID/],
    [5, { dryRun: true }, /^--dry-run: goes with --webhook ID/],
    [undefined, { webhook: 'crm', to: 'crm-v2' }, /^--to: expected an ISO-8601 time.* --to-webhook WEBHOOK_ID\)$/],
    [
      5,
      { to: 'crm-v2', toWebhook: 'crm-v3' },
      /^--to-webhook: expected either --to WEBHOOK_ID or --to-webhook WEBHOOK_ID/,
    ],
    [undefined, { webhook: 'crm', from, to: '2026-11-19T00:00:00Z' }, /^--from: expected a time before --to/],
    [
      undefined,
      { webhook: 'crm', reason: 'Rejected' },
      /^--reason: expected one of rejected, retries_exhausted, expired, too_large, webhook_removed, got "Rejected"$/,
    ],
  ] as const)('refuses PAYLOAD_ID %s with %o as bad usage', (payloadId, options, message) => {
    const request = redeliverRequest(payloadId, options);
    expect(request).toHaveProperty('usageError');
    expect((request as { usageError: string }).usageError).toMatch(message);
  });
});
