import type pg from 'pg';
import { UserError } from '../errors.js';
import { quotedPrefix } from '../text/printable.js';

/**
 * Refuses a --webhook id the service has never run with (asset_webhooks.webhooks
 * keeps every id a `run` process has configured, removed ones included), so a
 * typo is not answered with an empty list.
 */
export async function assertKnownWebhook(pool: pg.Pool, webhookId: string): Promise<void> {
  const { rows } = await pool.query<{ webhook_id: string }>(
    'select webhook_id from asset_webhooks.webhooks order by webhook_id',
  );
  const known = rows.map((row) => row.webhook_id);
  if (known.includes(webhookId)) return;
  const shown =
    known.length === 0
      ? 'none yet: has `run` started with this configuration?'
      : known.length > 20
        ? `${known.slice(0, 20).join(', ')}, ...`
        : known.join(', ');
  throw new UserError(
    'unknown_webhook',
    `--webhook: expected the id of a webhook the service has run with (${shown}), got ${quotedPrefix(webhookId)}`,
  );
}
