import type pg from 'pg';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { oldestTransactionAge } from '../db/long-transactions.js';
import type { AttemptResult } from '../delivery/attempt-store.js';
import { captureGaps } from '../migrate/binding-check.js';

/** The values of asset_webhooks_webhook_state's `state` label. */
export const WEBHOOK_STATES = ['healthy', 'backing_off', 'throttled'] as const;

/**
 * The service's Prometheus metrics. Labels carry webhook ids, checks and
 * outcome classes only: never a url, a header or a secret.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly eventsCoalesced = new Counter({
    name: 'asset_webhooks_events_coalesced_total',
    help: 'Outbox events consumed by coalescing runs.',
    registers: [this.registry],
  });
  readonly eventsRouted = new Counter({
    name: 'asset_webhooks_event_routes_total',
    help: 'Event-to-webhook decisions by route: deliver, collapsed, disabled, asset_gone, or excluded by a filter check (event_outcomes names it).',
    labelNames: ['route'],
    registers: [this.registry],
  });
  readonly payloadsCreated = new Counter({
    name: 'asset_webhooks_payloads_created_total',
    help: 'Payloads created by coalescing runs.',
    registers: [this.registry],
  });
  readonly deliveryAttempts = new Counter({
    name: 'asset_webhooks_delivery_attempts_total',
    help: 'Delivery attempts by webhook and outcome (delivered, retry, rejected, retries_exhausted, expired).',
    labelNames: ['webhook', 'outcome'],
    registers: [this.registry],
  });
  readonly deliveryDuration = new Histogram({
    name: 'asset_webhooks_delivery_duration_seconds',
    help: 'Duration of delivery requests.',
    labelNames: ['webhook'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly secretFailures = new Counter({
    name: 'asset_webhooks_secret_resolution_failures_total',
    help: 'Delivery attempts that failed because a secret (the API key, or the signing keys) could not be resolved or was malformed.',
    labelNames: ['webhook'],
    registers: [this.registry],
  });

  readonly configFileUnusable = new Gauge({
    name: 'asset_webhooks_config_file_unusable',
    help:
      '1 while the configuration file could not be used by the last reload (SIGHUP, or --watch-config seeing it change): ' +
      'missing, unreadable, not a regular file, larger than 4 MiB, or invalid; the configuration in use stays. 0 once a reload applies.',
    registers: [this.registry],
  });
  readonly configReloads = new Counter({
    name: 'asset_webhooks_config_reloads_total',
    help: 'Configuration reloads by outcome: applied, or refused (the configuration in use stays).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  constructor(pool: pg.Pool) {
    collectDefaultMetrics({ register: this.registry, prefix: 'asset_webhooks_process_' });
    // Gauges read from the database at scrape time, so every process reports the shared truth.
    new Gauge({
      name: 'asset_webhooks_outbox_backlog_rows',
      help: 'Outbox rows not yet coalesced.',
      registers: [this.registry],
      async collect() {
        const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from asset_webhooks.outbox');
        this.set(rows[0]?.n ?? 0);
      },
    });
    new Gauge({
      name: 'asset_webhooks_outbox_oldest_age_seconds',
      help: 'Age of the oldest outbox row not yet coalesced (0 when empty).',
      registers: [this.registry],
      async collect() {
        const { rows } = await pool.query<{ age: number | null }>(
          'select extract(epoch from now() - min(occurred_at))::float8 as age from asset_webhooks.outbox',
        );
        this.set(Math.max(0, rows[0]?.age ?? 0));
      },
    });
    new Gauge({
      name: 'asset_webhooks_oldest_transaction_age_seconds',
      help:
        'Age of the oldest open transaction or snapshot in this database that holds back the removal of dead rows (0 when none). ' +
        'While one stays open, delivering a backlog slows more the longer the backlog: see sql/runbooks/backlog-and-lag.sql.',
      registers: [this.registry],
      async collect() {
        this.set((await oldestTransactionAge(pool))?.seconds ?? 0);
      },
    });
    new Gauge({
      name: 'asset_webhooks_payloads_pending',
      help: 'Payloads waiting for delivery, by webhook.',
      labelNames: ['webhook'],
      registers: [this.registry],
      async collect() {
        const { rows } = await pool.query<{ webhook_id: string; n: number }>(
          `select webhook_id, count(*)::int as n from asset_webhooks.payloads where status in ('open', 'pending') group by webhook_id`,
        );
        this.reset();
        for (const row of rows) this.set({ webhook: row.webhook_id }, row.n);
      },
    });
    new Gauge({
      name: 'asset_webhooks_webhook_paused',
      help: 'Webhooks paused (paused: true): 1 while their payloads wait unsent, without expiring.',
      labelNames: ['webhook'],
      registers: [this.registry],
      async collect() {
        const { rows } = await pool.query<{ webhook_id: string }>(
          'select webhook_id from asset_webhooks.webhooks where paused_since is not null',
        );
        this.reset();
        for (const row of rows) this.set({ webhook: row.webhook_id }, 1);
      },
    });
    new Gauge({
      name: 'asset_webhooks_webhook_state',
      help:
        'Delivery state of each enabled webhook, 1 for the state it is in and 0 for the others: healthy; ' +
        'backing_off (attempts failed since the last success: at most one attempt in flight until one succeeds); ' +
        "throttled (its receiver's Retry-After holds every payload of the webhook back until it passes).",
      labelNames: ['webhook', 'state'],
      registers: [this.registry],
      async collect() {
        const { rows } = await pool.query<{ webhook_id: string; state: string }>(
          `select webhook_id,
                  case when hold_until > now() then 'throttled' when failing_since is not null then 'backing_off' else 'healthy' end as state
           from asset_webhooks.webhooks where enabled`,
        );
        this.reset();
        for (const row of rows) {
          for (const state of WEBHOOK_STATES) this.set({ webhook: row.webhook_id, state }, row.state === state ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: 'asset_webhooks_dead_letters',
      help: 'Dead-lettered payloads, by webhook.',
      labelNames: ['webhook'],
      registers: [this.registry],
      async collect() {
        const { rows } = await pool.query<{ webhook_id: string; n: number }>(
          `select webhook_id, count(*)::int as n from asset_webhooks.payloads where status = 'dead_lettered' group by webhook_id`,
        );
        this.reset();
        for (const row of rows) this.set({ webhook: row.webhook_id }, row.n);
      },
    });
    new Gauge({
      name: 'asset_webhooks_capture_errors',
      help:
        'Changes of the asset tables that were committed but not captured (rows of asset_webhooks.capture_errors), by table and operation. ' +
        'Falls only when an operator deletes reviewed rows: alert on any increase.',
      labelNames: ['table', 'operation'],
      registers: [this.registry],
      async collect() {
        const { rows } = await pool.query<{ table_name: string; operation: string; n: number }>(
          'select table_name, operation, count(*)::int as n from asset_webhooks.capture_errors group by table_name, operation',
        );
        this.reset();
        for (const row of rows) this.set({ table: row.table_name, operation: row.operation }, row.n);
      },
    });
    new Gauge({
      name: 'asset_webhooks_capture_gaps',
      help:
        'Ways the installed capture triggers let changes through (disabled, firing on origin only, no TRUNCATE trigger), ' +
        'one per table and kind, as run warns at start; 0 when none. A restore that disables triggers shows here while it lasts.',
      registers: [this.registry],
      async collect() {
        this.set((await captureGaps(pool)).length);
      },
    });
  }

  /** Records one finished delivery attempt. */
  recordAttempt(webhookId: string, result: AttemptResult): void {
    this.deliveryAttempts.inc({ webhook: webhookId, outcome: result.outcome });
    if (result.durationMs !== null) this.deliveryDuration.observe({ webhook: webhookId }, result.durationMs / 1000);
    if (result.errorClass === 'secret_unavailable') this.secretFailures.inc({ webhook: webhookId });
  }

  /** Records one reload of the configuration file: applied, or refused. */
  recordReload(applied: boolean): void {
    this.configFileUnusable.set(applied ? 0 : 1);
    this.configReloads.inc({ outcome: applied ? 'applied' : 'refused' });
  }

  /** Delivery requests in flight in this process, read from the pump at scrape time. */
  trackRequestsInFlight(read: () => number): void {
    new Gauge({
      name: 'asset_webhooks_delivery_requests_in_flight',
      help: 'Delivery requests this process has in flight (bounded by maxRequestsInFlight).',
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** Records one coalescing run. */
  recordRun(result: { events: number; payloads: number; routes: Record<string, number> }): void {
    this.eventsCoalesced.inc(result.events);
    this.payloadsCreated.inc(result.payloads);
    for (const [route, count] of Object.entries(result.routes)) this.eventsRouted.inc({ route }, count);
  }
}
