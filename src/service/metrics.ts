import type pg from 'pg';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ROUTES } from '../coalesce/route.js';
import { ATTEMPT_OUTCOMES, type AttemptResult } from '../delivery/attempt-store.js';
import { readEvery, registerDatabaseGauges } from './database-gauges.js';
import { registerProcessMetrics } from './process-metrics.js';

/** The values of asset_webhooks_reconciles_total's `outcome` label. */
const RECONCILE_OUTCOMES = ['completed', 'failed'] as const;

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
    help: 'Event-to-webhook decisions by route: deliver, collapsed, disabled, asset_gone, in_trash, excluded by a filter check (event_outcomes names it), or unmatched (a mirror webhook got it as UNMATCHED).',
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
    help: 'Delivery attempts by webhook and outcome (delivered, retry, rejected, retries_exhausted, expired, suspended).',
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
  readonly localFaults = new Counter({
    name: 'asset_webhooks_delivery_local_faults_total',
    help:
      'Delivery attempts that failed because this process ran out of file descriptors or memory (error class local_fault). ' +
      'They are retried after a few seconds without counting against the retries; /readyz is not ready while they happen.',
    labelNames: ['webhook'],
    registers: [this.registry],
  });
  readonly deliveryClaims = new Counter({
    name: 'asset_webhooks_delivery_claims_total',
    help:
      "Claim statements of this process's delivery pump by result: payloads (it claimed some), or none. It claims when " +
      'payloads are announced, every second, and whenever a slot frees; a rate of none near the poll rate is an idle pump.',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly deliverySweeps = new Counter({
    name: 'asset_webhooks_delivery_sweeps_total',
    help:
      "Crash-recovery and expiry sweeps of this process's delivery pump (one every 5 s) by outcome: completed, or failed " +
      '(tried again at the next). While they fail, attempts of crashed processes stay open and no payload expires.',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  /** performance.now() of the latest local fault, if any. */
  private lastLocalFaultMs: number | undefined;
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

  /**
   * `refreshEveryMs`: the values read from the database (backlog, pending
   * payloads, webhook states...) are read at most once per this many
   * milliseconds, by the first scrape after it has passed; scrapes in between
   * are served the values read last and cost the database nothing. `run`
   * passes the coalescing interval.
   */
  constructor(pool: pg.Pool, refreshEveryMs: () => number = () => 0) {
    registerProcessMetrics(this.registry);
    // Series of the label values known from the start, at zero (see knowWebhooks).
    for (const outcome of ['applied', 'refused']) this.configReloads.inc({ outcome }, 0);
    for (const route of ROUTES) this.eventsRouted.inc({ route }, 0);
    for (const outcome of ['completed', 'failed']) this.deliverySweeps.inc({ outcome }, 0);
    for (const result of ['payloads', 'none']) this.deliveryClaims.inc({ result }, 0);
    // Gauges read from the database, so every process reports the shared truth.
    registerDatabaseGauges(this.registry, readEvery(pool, refreshEveryMs));
  }

  /**
   * Creates, at zero, every series of these webhooks that a counter or the
   * latency histogram keeps: a labelled series otherwise appears only at its
   * first increment, and increase() over a series that begins at 1 is 0, so a
   * rule on increase() would miss a first failure. `run` calls it with the
   * document's webhooks at start and on every reload; series of webhooks that
   * were there before stay as they are.
   */
  knowWebhooks(webhooks: ReadonlyArray<{ readonly id: string; readonly mirror: boolean }>): void {
    for (const { id: webhook, mirror } of webhooks) {
      for (const outcome of ATTEMPT_OUTCOMES) this.deliveryAttempts.inc({ webhook, outcome }, 0);
      this.deliveryDuration.zero({ webhook });
      this.localFaults.inc({ webhook }, 0);
      this.secretFailures.inc({ webhook }, 0);
      // Only a mirror webhook is reconciled.
      if (mirror) {
        for (const outcome of RECONCILE_OUTCOMES) this.reconciles.inc({ webhook, outcome }, 0);
        for (const type of ['EDITED', 'UNMATCHED']) this.reconcileEvents.inc({ webhook, type }, 0);
      }
    }
  }

  /** Records one finished delivery attempt. */
  recordAttempt(webhookId: string, result: AttemptResult): void {
    this.deliveryAttempts.inc({ webhook: webhookId, outcome: result.outcome });
    if (result.durationMs !== null) this.deliveryDuration.observe({ webhook: webhookId }, result.durationMs / 1000);
    if (result.errorClass === 'secret_unavailable') this.secretFailures.inc({ webhook: webhookId });
    if (result.errorClass === 'local_fault') {
      this.localFaults.inc({ webhook: webhookId });
      this.lastLocalFaultMs = performance.now();
    }
  }

  /** Seconds since an attempt of this process last failed as local_fault, or null when none has. */
  secondsSinceLocalFault(): number | null {
    return this.lastLocalFaultMs === undefined ? null : (performance.now() - this.lastLocalFaultMs) / 1000;
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

  /**
   * The intervalSeconds of this process's configuration, read at scrape time
   * so a reload shows at once: alerts on how long events wait compare with it
   * (deploy/prometheus/alerts.yaml).
   */
  trackInterval(read: () => number): void {
    new Gauge({
      name: 'asset_webhooks_interval_seconds',
      help: "The configured intervalSeconds of this process's document: how often events are coalesced and sent.",
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  readonly reconciles = new Counter({
    name: 'asset_webhooks_reconciles_total',
    help: 'Reconciles of mirror webhooks that run processes started after a reload changed their filters, by outcome (completed, failed).',
    labelNames: ['webhook', 'outcome'],
    registers: [this.registry],
  });
  readonly reconcileEvents = new Counter({
    name: 'asset_webhooks_reconcile_events_total',
    help: 'Events sent by the reconciles this process ran, by webhook and type (EDITED, UNMATCHED).',
    labelNames: ['webhook', 'type'],
    registers: [this.registry],
  });

  /** Records one completed reconcile. */
  recordReconcile(result: { webhookId: string; editedSent: number; unmatchedSent: number }): void {
    this.reconciles.inc({ webhook: result.webhookId, outcome: 'completed' });
    this.reconcileEvents.inc({ webhook: result.webhookId, type: 'EDITED' }, result.editedSent);
    this.reconcileEvents.inc({ webhook: result.webhookId, type: 'UNMATCHED' }, result.unmatchedSent);
  }

  /** Records one coalescing run. */
  recordRun(result: { events: number; payloads: number; routes: Record<string, number> }): void {
    this.eventsCoalesced.inc(result.events);
    this.payloadsCreated.inc(result.payloads);
    for (const [route, count] of Object.entries(result.routes)) this.eventsRouted.inc({ route }, count);
  }
}
