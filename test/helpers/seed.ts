import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { pino } from 'pino';
import { coalesce, type CoalesceResult } from '../../src/coalesce/run.js';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';
import { EVENT_TYPES } from '../../src/interfaces.js';
import { ROUTING_FEATURES } from '../../src/service/routing-features.js';

export const silentLogger = pino({ level: 'silent' });

/**
 * The process id under which tests that call syncWebhooks record their
 * configuration: one per test file, as one `run` process reloading.
 */
export const TEST_PROCESS_ID = randomUUID();

/** A webhook of every supertype and event type, without filters: it receives every event of a top-level asset. */
export function openWebhook(id: string, overrides: Partial<RoutedWebhook> = {}): RoutedWebhook {
  return {
    id,
    enabled: true,
    batchSize: 100,
    resourceTypes: ['Resource', 'Project', 'Adaptation', 'Template'],
    eventTypes: [...EVENT_TYPES],
    filters: [],
    ...overrides,
  };
}

/** Registers webhooks as the service does at start (the pump reads this table). */
export async function registerWebhooks(
  pool: pg.Pool,
  webhooks: readonly RoutedWebhook[],
  concurrency = 1,
): Promise<void> {
  await pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
     select id, 'http://127.0.0.1/' || id, enabled, $3 from unnest($1::text[], $2::boolean[]) as w(id, enabled)
     on conflict (webhook_id) do update set enabled = excluded.enabled, concurrency = excluded.concurrency`,
    [webhooks.map((w) => w.id), webhooks.map((w) => w.enabled), concurrency],
  );
}

export function runCoalesce(
  pool: pg.Pool,
  webhooks: readonly RoutedWebhook[],
  options: { maxPayloadBytes?: number; chunkSize?: number } = {},
): Promise<CoalesceResult> {
  return coalesce({
    pool,
    webhooks,
    maxPayloadBytes: options.maxPayloadBytes ?? 16 * 1024 * 1024,
    chunkSize: options.chunkSize,
    logger: silentLogger,
    // As the service runs it: with the mirror webhooks' routing.
    features: ROUTING_FEATURES,
  });
}

export interface StoredPayload {
  payload_id: number;
  webhook_id: string;
  status: string;
  /** The body every attempt sends: its own, or that of the payload named by body_of. */
  body: string;
  body_of: number | null;
  event_count: number;
  byte_size: number;
  dead_letter_reason: string | null;
}

export async function payloads(pool: pg.Pool, webhookId?: string): Promise<StoredPayload[]> {
  const { rows } = await pool.query<StoredPayload>(
    `select p.payload_id, p.webhook_id, p.status, coalesce(b.body, p.body) as body, p.body_of, p.event_count, p.byte_size,
            p.dead_letter_reason
     from asset_webhooks.payloads p left join asset_webhooks.payloads b on b.payload_id = p.body_of
     where $1::text is null or p.webhook_id = $1 order by p.payload_id`,
    [webhookId ?? null],
  );
  return rows;
}

export interface BodyEvent {
  atomId: number | null;
  eventId: string;
  eventTimestamp: string;
  assetId: number;
  assetUuid: string;
  eventType: string;
}

export function bodyEvents(payload: StoredPayload): BodyEvent[] {
  return (JSON.parse(payload.body) as { events: BodyEvent[] }).events;
}

export async function outcomes(pool: pg.Pool): Promise<
  Array<{
    event_id: string;
    event_type: string;
    asset_id: number;
    webhook_id: string;
    outcome: string;
    excluded_by: string | null;
    payload_id: number | null;
  }>
> {
  const { rows } = await pool.query(
    'select event_id, event_type, asset_id, webhook_id, outcome, excluded_by, payload_id from asset_webhooks.event_outcomes order by occurred_at, event_id, webhook_id',
  );
  return rows;
}

export async function resetData(pool: pg.Pool): Promise<void> {
  await pool.query(`truncate public.assets, public.asset_atoms, public.asset_keywords, public.asset_additional_fields,
    asset_webhooks.outbox, asset_webhooks.events, asset_webhooks.payloads, asset_webhooks.webhooks,
    asset_webhooks.coalesce_runs, asset_webhooks.process_configurations, asset_webhooks.in_flight,
    asset_webhooks.attempt_log restart identity cascade`);
  await pool.query('delete from graphile_worker._private_jobs');
}
