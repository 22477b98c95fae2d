import type pg from 'pg';
import { UserError } from '../errors.js';
import { quotedPrefix } from '../text/printable.js';

/**
 * The bytes that mark an UNMATCHED event in a stored body. The serializer
 * (src/payloads/serialize.ts) writes every key bare and every string value
 * JSON-escaped, so these bytes can only be an event's own type: inside a
 * value each quote is preceded by a backslash.
 */
const UNMATCHED_IN_BODY = `"eventType":${JSON.stringify('UNMATCHED')}`;

/**
 * Refuses to move dead letters that carry UNMATCHED events to `to` unless it
 * is a mirror webhook: a webhook that is not a mirror one never receives
 * UNMATCHED (docs/mirror.md), and its receiver has no set to remove an asset
 * from. Whether `to` is a mirror webhook is read from the newest routing that
 * names it (the configuration coalescing last routed by, or a reconcile's);
 * a webhook no routing names yet counts as not a mirror one. Payloads without
 * UNMATCHED move to any webhook.
 */
export async function assertUnmatchedMovesToMirror(
  client: pg.PoolClient,
  option: string,
  to: string,
  payloadIds: readonly number[],
): Promise<void> {
  if (payloadIds.length === 0 || (await isMirrorWebhook(client, to))) return;
  const {
    rows: [carrier],
  } = await client.query<{ payload_id: number }>(
    `select p.payload_id from asset_webhooks.payloads p
     left join asset_webhooks.payloads b on b.payload_id = p.body_of
     where p.payload_id = any ($1::bigint[]) and strpos(coalesce(b.body, p.body), $2) > 0
     order by p.payload_id limit 1`,
    [payloadIds, UNMATCHED_IN_BODY],
  );
  if (carrier === undefined) return;
  const more = payloadIds.length > 1 ? ' (and perhaps others of those selected)' : '';
  throw new UserError(
    'unmatched_to_plain_webhook',
    `${option}: expected a mirror webhook, got ${quotedPrefix(to)}, which is not one: payload ${carrier.payload_id}${more} carries UNMATCHED events, which only a mirror webhook receives; move it to a mirror webhook, or redeliver it to its own`,
  );
}

async function isMirrorWebhook(client: pg.PoolClient, webhookId: string): Promise<boolean> {
  const {
    rows: [newest],
  } = await client.query<{ mirror: boolean }>(
    `select coalesce((w.definition ->> 'mirror')::boolean, false) as mirror
     from asset_webhooks.routing_webhooks w join asset_webhooks.routings r using (routing_id)
     where w.webhook_id = $1
     order by r.last_used_at desc, r.routing_id desc limit 1`,
    [webhookId],
  );
  return newest?.mirror === true;
}
