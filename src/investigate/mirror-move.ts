import type pg from 'pg';
import { UserError } from '../errors.js';
import { quotedPrefix } from '../text/printable.js';

/** Where a redelivery sends its dead letters, for the wording of a refusal. */
export type RedeliveryTarget =
  /** Moved to `to`, named by `option` (`--to`, `--to-webhook`). */
  | { readonly option: string; readonly to: string }
  /** Sent to its own webhook; `option` names the selection (`PAYLOAD_ID`, `--webhook`). */
  | { readonly option: string; readonly to: null };

/**
 * Refuses a redelivery of dead letters that carry UNMATCHED events to a
 * webhook that is not a mirror one, moved there or its own set back to
 * `mirror: false` (asset_webhooks.unmatched_refusals: the same rule
 * redeliver_payloads enforces for every caller, the runbook included; this
 * check words it for the command line, and covers a dry run). Payloads
 * without UNMATCHED go to any webhook.
 */
export async function assertUnmatchedReachesMirror(
  client: pg.PoolClient,
  target: RedeliveryTarget,
  payloadIds: readonly number[],
): Promise<void> {
  if (payloadIds.length === 0) return;
  const { rows } = await client.query<{ payload_id: number; webhook_id: string }>(
    'select u.payload_id, u.webhook_id from asset_webhooks.unmatched_refusals($1::bigint[], $2) u order by u.payload_id',
    [payloadIds, target.to],
  );
  const carrier = rows[0];
  if (carrier === undefined) return;
  const more = rows.length > 1 ? ` (and ${rows.length - 1} more of those selected)` : '';
  throw new UserError(
    'unmatched_to_plain_webhook',
    target.to !== null
      ? `${target.option}: expected a mirror webhook, got ${quotedPrefix(target.to)}, which is not one: payload ${carrier.payload_id}${more} carries UNMATCHED events, which only a mirror webhook receives; move it to a mirror webhook, or redeliver it to its own`
      : `${target.option}: expected a dead letter of a mirror webhook, got payload ${carrier.payload_id}${more} of ${quotedPrefix(carrier.webhook_id)}, which is not one any more (mirror: false): it carries UNMATCHED events, which only a mirror webhook receives; move it to a mirror webhook (dead-letters redeliver ${carrier.payload_id} --to WEBHOOK_ID)`,
  );
}
