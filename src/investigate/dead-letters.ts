import os from 'node:os';
import type pg from 'pg';
import { operatorDb } from '../db/kysely.js';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { inTransaction } from '../db/transaction.js';
import { UserError } from '../errors.js';
import { redeliverPayloads } from '../lifecycle/transitions.js';
import { assertUnmatchedReachesMirror } from './mirror-move.js';
import { assertMoveTarget, readWebhookState, type WebhookState } from './webhook-state.js';

export interface DeadLetter {
  readonly payloadId: number;
  readonly webhookId: string;
  readonly reason: string;
  /** Attempts of the current series (a redelivery starts a new one at 0). */
  readonly attempts: number;
  /** 1, plus one per redelivery. */
  readonly series: number;
  /** Of the last attempt made, in whichever series. */
  readonly lastStatusCode: number | null;
  readonly lastError: string | null;
  readonly eventCount: number;
  readonly eventIds: readonly string[];
  readonly createdAt: Date;
  readonly lastAttemptAt: Date | null;
  readonly deadLetteredAt: Date;
}

/** The dead-letter store, newest first. */
export async function listDeadLetters(pool: pg.Pool, webhookId?: string): Promise<DeadLetter[]> {
  let query = operatorDb(pool).selectFrom('asset_webhooks.dead_letters').selectAll();
  if (webhookId !== undefined) query = query.where('webhook_id', '=', webhookId);
  const rows = await query.orderBy('dead_lettered_at', 'desc').limit(10_000).execute();
  return rows.map((row) => ({
    payloadId: row.payload_id,
    webhookId: row.webhook_id,
    reason: row.reason,
    attempts: row.attempts,
    series: row.series,
    lastStatusCode: row.last_status_code,
    lastError: row.last_error,
    eventCount: row.event_count,
    eventIds: row.event_ids,
    createdAt: row.created_at,
    lastAttemptAt: row.last_attempt_at,
    deadLetteredAt: row.dead_lettered_at,
  }));
}

export function renderDeadLetters(letters: readonly DeadLetter[]): string {
  if (letters.length === 0) return 'the dead-letter store is empty';
  return letters
    .map((l) =>
      [
        `payload ${l.payloadId}  webhook ${l.webhookId}  ${l.reason}  dead-lettered ${l.deadLetteredAt.toISOString()}`,
        `    ${l.eventCount} events, ${l.attempts} attempt(s)${l.series > 1 ? ` since redelivery ${l.series - 1}` : ''}, ` +
          `last result: ${l.lastStatusCode !== null ? `HTTP ${l.lastStatusCode}` : (l.lastError ?? 'none')}`,
        `    first events: ${l.eventIds.slice(0, 3).join(', ')}${l.eventIds.length > 3 ? ', ...' : ''}`,
        `    redeliver: asset-webhooks dead-letters redeliver ${l.payloadId}${l.reason === 'webhook_removed' ? ' --to WEBHOOK_ID' : ''}`,
      ].join('\n'),
    )
    .join('\n');
}

export type { WebhookState } from './webhook-state.js';

export interface Redelivery {
  readonly series: number;
  /** Where the new series is sent. */
  readonly webhookId: string;
  readonly webhookState: WebhookState;
  /** The webhook the payload belonged to before `--to` moved it; null when it stayed. */
  readonly movedFrom: string | null;
}

/**
 * Sends one dead-lettered payload again: same body and eventIds, a fresh series
 * of attempts (expiry counted from now), recorded in asset_webhooks.redeliveries.
 *
 * With `to`, the payload moves to that webhook (its webhook_id changes, and
 * the redelivery records where it came from): for a webhook whose url, and so
 * whose derived id, changed, or one removed for another. Only an enabled
 * webhook of the running service's configuration is accepted as `to`, so the
 * moved payload does not wait. In the new webhook's queue it takes its place
 * by payload id: before the payloads created after it.
 */
export async function redeliver(
  pool: pg.Pool,
  payloadId: number,
  requestedBy = `${os.userInfo().username}@${os.hostname()}`,
  to?: string,
  /** The option that named `to`, for its error message. */
  toOption = '--to',
): Promise<Redelivery> {
  const redelivered = await inTransaction(pool, async (client) => {
    const { rows } = await client.query<{
      status: string;
      webhook_id: string;
      series: number;
      dead_letter_reason: string | null;
    }>(
      'select status, webhook_id, series, dead_letter_reason from asset_webhooks.payloads where payload_id = $1 for update',
      [payloadId],
    );
    const payload = rows[0];
    if (!payload)
      throw new UserError(
        'unknown_payload',
        `PAYLOAD_ID: expected the id of a dead-lettered payload, got ${payloadId} (no such payload)`,
      );
    if (payload.status !== 'dead_lettered') {
      throw new UserError(
        'not_dead_lettered',
        `payload ${payloadId}: expected a dead-lettered payload, got one that is ${payload.status}`,
      );
    }
    const webhookId = to ?? payload.webhook_id;
    // A move is refused unless the webhook is sent to; either way its row is locked against a concurrent recording of the configuration.
    const webhookState =
      to === undefined
        ? await readWebhookState(client, webhookId, { lock: true })
        : await assertMoveTarget(client, toOption, to);
    await assertUnmatchedReachesMirror(
      client,
      to !== undefined && to !== payload.webhook_id ? { option: toOption, to } : { option: 'PAYLOAD_ID', to: null },
      [payloadId],
    );
    const movedFrom = webhookId === payload.webhook_id ? null : payload.webhook_id;
    const [answer] = await redeliverPayloads(client, [payloadId], { requestedBy, toWebhookId: to ?? null });
    if (!answer?.applied || answer.series === null)
      throw new Error(`payload ${payloadId}: the redelivery was refused (${answer?.reason ?? 'no answer'})`);
    const series = answer.series;
    return { series, webhookId, webhookState, movedFrom };
  });
  // Every delivery pump is woken to send it; if this fails, their next poll finds it.
  await announcePayloadsReady(pool).catch(() => {});
  return redelivered;
}
