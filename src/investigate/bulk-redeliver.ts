import os from 'node:os';
import type pg from 'pg';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { inTransaction } from '../db/transaction.js';
import type { DeadLetterReason } from '../interfaces.js';
import { redeliverPayloads } from '../lifecycle/transitions.js';
import { assertUnmatchedReachesMirror } from './mirror-move.js';
import { assertMoveTarget, readWebhookState, type WebhookState } from './webhook-state.js';

/** Every dead-letter reason, for `--reason`; the check below fails to compile when the type gains one that is missing here. */
export const DEAD_LETTER_REASONS = [
  'rejected',
  'retries_exhausted',
  'expired',
  'too_large',
  'webhook_removed',
] as const satisfies readonly DeadLetterReason[];
const everyReasonListed: [Exclude<DeadLetterReason, (typeof DEAD_LETTER_REASONS)[number]>] extends [never]
  ? true
  : never = true;
void everyReasonListed;

/**
 * Which dead letters of one webhook a bulk redelivery takes: those
 * dead-lettered within [from, to) (either bound may be left open), of one
 * reason or of any. The window is on the time of dead-lettering, as
 * `dead-letters` lists them: the dead letters of an outage are those that
 * ended during it, whenever their events occurred.
 */
export interface DeadLetterSelection {
  readonly webhookId: string;
  readonly from?: Date | undefined;
  readonly to?: Date | undefined;
  readonly reason?: string | undefined;
}

export interface BulkRedelivery {
  /** The webhook whose dead letters were chosen. */
  readonly webhookId: string;
  /** The webhook they were moved to (`--to-webhook`); null when they stay with webhookId. */
  readonly movedTo: string | null;
  /** Payloads started again (with dryRun: that would be). */
  readonly count: number;
  readonly firstPayloadId: number | null;
  readonly lastPayloadId: number | null;
  readonly dryRun: boolean;
  /** Of the webhook they are sent to: movedTo, or else webhookId. */
  readonly webhookState: WebhookState;
}

const MATCHING = `p.webhook_id = $1 and p.status = 'dead_lettered'
  and ($2::timestamptz is null or p.dead_lettered_at >= $2) and ($3::timestamptz is null or p.dead_lettered_at < $3)
  and ($4::text is null or p.dead_letter_reason = $4)`;

/**
 * Sends every matching dead letter again, each exactly as a single
 * `dead-letters redeliver PAYLOAD_ID` does (src/investigate/dead-letters.ts):
 * same body and eventIds, a new series of attempts whose expiry counts from
 * now, one row in asset_webhooks.redeliveries naming who asked and the reason
 * it had. All of them in one transaction: either every match is started or
 * none is. They wait in the webhook's queue, which is sent in payload order,
 * so with concurrency 1 they go out in payload order (after any payload of a
 * lower id still waiting). With dryRun nothing is changed and the count is of
 * what would be started.
 *
 * With `moveTo`, each moves to that webhook as `dead-letters redeliver
 * PAYLOAD_ID --to` moves one (its webhook_id changes; the redelivery records
 * where it came from): for the dead letters of a webhook removed from the
 * configuration, which sent back to it would be dead-lettered again as
 * webhook_removed. The webhook must be one the running service sends to
 * (checked in a dry run too); in its queue they take their places by payload
 * id, before the payloads created after them.
 */
export async function redeliverDeadLetters(
  pool: pg.Pool,
  selection: DeadLetterSelection,
  {
    dryRun = false,
    requestedBy = `${os.userInfo().username}@${os.hostname()}`,
    moveTo,
  }: { dryRun?: boolean; requestedBy?: string; moveTo?: string | undefined } = {},
): Promise<BulkRedelivery> {
  const parameters = [selection.webhookId, selection.from ?? null, selection.to ?? null, selection.reason ?? null];
  const target = moveTo === undefined || moveTo === selection.webhookId ? null : moveTo;
  const counted = await inTransaction(pool, async (client) => {
    if (target !== null) await assertMoveTarget(client, '--to-webhook', target);
    // Locked in payload order, as the single redelivery locks its one row, so a
    // delivery settling one of them meanwhile waits rather than interleaves.
    const { rows: matching } = await client.query<{ payload_id: number }>(
      `select p.payload_id from asset_webhooks.payloads p where ${MATCHING} order by p.payload_id${dryRun ? '' : ' for update'}`,
      parameters,
    );
    const ids = matching.map((match) => match.payload_id);
    await assertUnmatchedReachesMirror(
      client,
      target !== null ? { option: '--to-webhook', to: target } : { option: '--webhook', to: null },
      ids,
    );
    if (dryRun) return { count: ids.length, first: ids[0] ?? null, last: ids.at(-1) ?? null };
    const answers = await redeliverPayloads(client, ids, { requestedBy, toWebhookId: target });
    // In payload order, as locked.
    const started = answers.filter((answer) => answer.applied).map((answer) => answer.payloadId);
    return { count: started.length, first: started[0] ?? null, last: started.at(-1) ?? null };
  });
  const webhookState = await readWebhookState(pool, target ?? selection.webhookId);
  // The pumps are woken once committed, as after a single redelivery; if this
  // fails, their next poll finds the payloads.
  if (!dryRun && counted.count > 0) await announcePayloadsReady(pool).catch(() => {});
  return {
    webhookId: selection.webhookId,
    movedTo: target,
    count: counted.count,
    firstPayloadId: counted.first,
    lastPayloadId: counted.last,
    dryRun,
    webhookState,
  };
}
