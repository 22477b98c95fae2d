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

/**
 * The channel on which `migrate` tells every `run` process, once it has
 * committed, that the schema or its functions may have changed: a process of
 * an older release stops claiming at once rather than at its next check (see
 * src/service/schema-watch.ts).
 */
export const SCHEMA_CHANGED_CHANNEL = 'asset_webhooks_schema_changed';
