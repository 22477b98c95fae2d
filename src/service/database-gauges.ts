import type pg from 'pg';
import { Counter, Gauge, type Registry } from 'prom-client';
import { readDatabaseValues, type DatabaseValues } from './database-values.js';

/** The values of asset_webhooks_webhook_state's `state` label. */
export const WEBHOOK_STATES = ['healthy', 'backing_off', 'throttled'] as const;

/**
 * The values read from the database: those read last while they are younger
 * than refreshEveryMs, else read again (once, whatever the number of scrapes
 * waiting). A failed read is the answer until refreshEveryMs has passed too,
 * so a database that is away is not asked once per scrape.
 */
export function readEvery(pool: pg.Pool, refreshEveryMs: () => number): () => Promise<DatabaseValues> {
  let values: { promise: Promise<DatabaseValues>; startedAt: number } | undefined;
  return () => {
    const now = performance.now();
    if (values === undefined || now - values.startedAt >= refreshEveryMs()) {
      const promise = readDatabaseValues(pool);
      promise.catch(() => {});
      values = { promise, startedAt: now };
    }
    return values.promise;
  };
}

/**
 * Registers the gauges whose values are read from the database, so every
 * process reports the shared truth; each scrape asks `databaseValues`.
 */
export function registerDatabaseGauges(registry: Registry, databaseValues: () => Promise<DatabaseValues>): void {
  registerBacklogGauges(registry, databaseValues);
  registerWebhookGauges(registry, databaseValues);
  registerHoldGauges(registry, databaseValues);
  registerRateGauges(registry, databaseValues);
  registerCaptureGauges(registry, databaseValues);
}

/** The outbox's backlog and what holds back its delivery. */
function registerBacklogGauges(registry: Registry, databaseValues: () => Promise<DatabaseValues>): void {
  new Gauge({
    name: 'asset_webhooks_outbox_backlog_rows',
    help: 'Outbox rows not yet coalesced.',
    registers: [registry],
    async collect() {
      this.set((await databaseValues()).outboxRows);
    },
  });
  new Gauge({
    name: 'asset_webhooks_outbox_oldest_age_seconds',
    help: 'Age of the oldest outbox row not yet coalesced (0 when empty).',
    registers: [registry],
    async collect() {
      this.set((await databaseValues()).outboxOldestAgeSeconds);
    },
  });
  new Gauge({
    name: 'asset_webhooks_oldest_transaction_age_seconds',
    help:
      'Age of the oldest open transaction or snapshot in this database that holds back the removal of dead rows (0 when none). ' +
      'While one stays open, delivering a backlog slows more the longer the backlog: see sql/runbooks/backlog-and-lag.sql.',
    registers: [registry],
    async collect() {
      this.set((await databaseValues()).oldestTransactionAgeSeconds);
    },
  });
}

/** Each webhook's payloads and delivery state. */
function registerWebhookGauges(registry: Registry, databaseValues: () => Promise<DatabaseValues>): void {
  new Gauge({
    name: 'asset_webhooks_payloads_pending',
    help: 'Payloads waiting for delivery, by webhook.',
    labelNames: ['webhook'],
    registers: [registry],
    async collect() {
      const { pending } = await databaseValues();
      this.reset();
      for (const [webhook, n] of pending) this.set({ webhook }, n);
    },
  });
  new Gauge({
    name: 'asset_webhooks_webhook_state',
    help:
      'Delivery state of each enabled webhook, 1 for the state it is in and 0 for the others: healthy; ' +
      'backing_off (attempts failed since the last success: at most one attempt in flight until one succeeds); ' +
      "throttled (its receiver's Retry-After holds every payload of the webhook back until it passes).",
    labelNames: ['webhook', 'state'],
    registers: [registry],
    async collect() {
      const { webhookStates } = await databaseValues();
      this.reset();
      for (const [webhook, current] of webhookStates) {
        for (const state of WEBHOOK_STATES) this.set({ webhook, state }, current === state ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: 'asset_webhooks_dead_letters',
    help: 'Dead-lettered payloads, by webhook.',
    labelNames: ['webhook'],
    registers: [registry],
    async collect() {
      const { deadLetters } = await databaseValues();
      this.reset();
      for (const [webhook, n] of deadLetters) this.set({ webhook }, n);
    },
  });
}

/** The webhooks held back on purpose: paused by their document, or suspended by a 410. */
function registerHoldGauges(registry: Registry, databaseValues: () => Promise<DatabaseValues>): void {
  new Gauge({
    name: 'asset_webhooks_webhook_paused',
    help: 'Webhooks paused (paused: true): 1 while their payloads wait unsent, without expiring.',
    labelNames: ['webhook'],
    registers: [registry],
    async collect() {
      const { paused } = await databaseValues();
      this.reset();
      for (const webhook of paused) this.set({ webhook }, 1);
    },
  });
  new Gauge({
    name: 'asset_webhooks_webhook_suspended',
    help:
      'Webhooks suspended by a 410 Gone answer (retry.disableOnGone): 1 while their payloads wait unsent, without expiring, ' +
      'until `asset-webhooks resume --webhook ID` or a new url.',
    labelNames: ['webhook'],
    registers: [registry],
    async collect() {
      const { suspended } = await databaseValues();
      this.reset();
      for (const webhook of suspended) this.set({ webhook }, 1);
    },
  });
}

/** The webhooks with a rateLimit: the rate in force, and the time their payloads waited for it. */
function registerRateGauges(registry: Registry, databaseValues: () => Promise<DatabaseValues>): void {
  new Gauge({
    name: 'asset_webhooks_webhook_rate_per_second',
    help:
      'Requests per second that all run processes together may send to a webhook with a rateLimit: its perSecond, ' +
      'or less while rateLimit.adaptive has lowered it after 429 or 503 answers.',
    labelNames: ['webhook'],
    registers: [registry],
    async collect() {
      const { rates } = await databaseValues();
      this.reset();
      for (const { webhook, perSecond } of rates) this.set({ webhook }, perSecond);
    },
  });
  new Counter({
    name: 'asset_webhooks_rate_limited_wait_seconds_total',
    help:
      'Seconds during which a webhook had payloads to send and room for them but no token of its rateLimit, ' +
      'counted by the database for all run processes: its rate() is the share of the time the rate held it back.',
    labelNames: ['webhook'],
    registers: [registry],
    async collect() {
      const { rates } = await databaseValues();
      // The database keeps the total: shown as it is, not added to.
      this.reset();
      for (const { webhook, heldSeconds } of rates) this.inc({ webhook }, heldSeconds);
    },
  });
}

/** Changes the capture let through, and how old the values above are. */
function registerCaptureGauges(registry: Registry, databaseValues: () => Promise<DatabaseValues>): void {
  new Gauge({
    name: 'asset_webhooks_capture_errors',
    help:
      'Changes of the asset tables that were committed but not captured (rows of asset_webhooks.capture_errors), by table and operation. ' +
      'Falls only when an operator deletes reviewed rows: alert on any increase.',
    labelNames: ['table', 'operation'],
    registers: [registry],
    async collect() {
      const { captureErrors } = await databaseValues();
      this.reset();
      for (const row of captureErrors) this.set({ table: row.table, operation: row.operation }, row.n);
    },
  });
  new Gauge({
    name: 'asset_webhooks_capture_gaps',
    help:
      'Ways the installed capture triggers let changes through (disabled, firing on origin only, no TRUNCATE trigger), ' +
      'one per table and kind, as run warns at start; 0 when none. A restore that disables triggers shows here while it lasts.',
    registers: [registry],
    async collect() {
      this.set((await databaseValues()).captureGaps);
    },
  });
  new Gauge({
    name: 'asset_webhooks_database_values_age_seconds',
    help:
      'Age of the values above that are read from the database: they are read at most once per coalescing interval, ' +
      'by the first scrape after it has passed, so scrapes cost the database nothing in between.',
    registers: [registry],
    async collect() {
      // Awaited before the clock is read: a scrape that reads the values anew
      // would otherwise subtract their readAt from a time taken before it.
      const { readAt } = await databaseValues();
      this.set((performance.now() - readAt) / 1000);
    },
  });
}
