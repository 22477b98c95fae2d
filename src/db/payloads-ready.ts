import type pg from 'pg';

/**
 * The channel on which a transaction that makes payloads ready to send (a
 * coalescing chunk, a redelivery, a reload that enables a webhook) tells the
 * delivery pumps of every `run` process. NOTIFY is delivered at commit, so a
 * pump woken by it always sees the payloads.
 */
export const PAYLOADS_READY_CHANNEL = 'asset_webhooks_payloads_ready';

/** Wakes every delivery pump once the caller's transaction commits (at once outside one). */
export async function announcePayloadsReady(client: pg.ClientBase | pg.Pool): Promise<void> {
  await client.query("select pg_notify($1, '')", [PAYLOADS_READY_CHANNEL]);
}
