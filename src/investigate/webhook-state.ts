import type pg from 'pg';
import { UserError } from '../errors.js';
import { quotedPrefix } from '../text/printable.js';

/**
 * Whether the running service sends to a webhook, as it last recorded it
 * (asset_webhooks.webhooks and process_configurations), and so what becomes
 * of a payload redelivered to it:
 *  - `enabled`: sent;
 *  - `paused`: waits, without expiring, until the webhook is resumed;
 *  - `suspended`: a 410 Gone answer suspended the webhook (retry.disableOnGone):
 *    waits, without expiring, until `resume --webhook ID` or a new url;
 *  - `disabled`: waits, and is dead-lettered as expired after
 *    retry.deadLetterAfterSeconds unless the webhook is enabled meanwhile;
 *  - `removed`: in the configuration of no running process: dead-lettered
 *    again as webhook_removed when a process next records its configuration
 *    (before its next coalescing run, at a reload or a start);
 *  - `not_configured`: no service has run with it: waits, and expires.
 * `removed` needs a recorded configuration: with none (no process has run
 * since the database was set up), nothing removes a webhook.
 */
export type WebhookState = 'enabled' | 'paused' | 'suspended' | 'disabled' | 'removed' | 'not_configured';

/** The state of one webhook; with `lock`, its row is locked against a concurrent recording of the configuration. */
export async function readWebhookState(
  client: pg.Pool | pg.PoolClient,
  webhookId: string,
  { lock = false }: { lock?: boolean } = {},
): Promise<WebhookState> {
  const {
    rows: [webhook],
  } = await client.query<{ enabled: boolean; paused: boolean; gone: boolean; removed: boolean }>(
    `select w.enabled, w.paused_since is not null as paused, w.gone_since is not null as gone,
            exists (select 1 from asset_webhooks.process_configurations)
              and not exists (select 1 from asset_webhooks.process_configurations c where w.webhook_id = any (c.webhook_ids)) as removed
     from asset_webhooks.webhooks w where w.webhook_id = $1${lock ? ' for share of w' : ''}`,
    [webhookId],
  );
  if (webhook === undefined) return 'not_configured';
  if (webhook.removed) return 'removed';
  if (!webhook.enabled) return 'disabled';
  return webhook.gone ? 'suspended' : webhook.paused ? 'paused' : 'enabled';
}

/**
 * Refuses `to` as the webhook to move dead letters to unless the running
 * service sends to it (a paused or suspended webhook counts: the payloads
 * wait for its resume without expiring). Locks its row, so a recording of the
 * configuration that would disable it waits for the move to commit.
 */
export async function assertMoveTarget(client: pg.PoolClient, option: string, to: string): Promise<WebhookState> {
  const state = await readWebhookState(client, to, { lock: true });
  if (state === 'enabled' || state === 'paused' || state === 'suspended') return state;
  const { rows: enabled } = await client.query<{ webhook_id: string }>(
    'select webhook_id from asset_webhooks.webhooks where enabled order by webhook_id limit 21',
  );
  const shown =
    enabled.length === 0
      ? 'none'
      : enabled
          .slice(0, 20)
          .map((row) => row.webhook_id)
          .join(', ') + (enabled.length > 20 ? ', ...' : '');
  const why = { disabled: 'disabled', removed: 'no longer configured', not_configured: 'never run with' }[state];
  throw new UserError(
    'webhook_not_enabled',
    `${option}: expected an enabled webhook of the running service (${shown}), got ${quotedPrefix(to)} (${why})`,
  );
}
