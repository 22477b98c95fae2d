import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { ServiceMetrics } from '../../src/service/metrics.js';
import { receiverConfig, type TestWebhook } from '../helpers/config.js';
import { eventually } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * What /metrics serves before anything has happened: the series that alert
 * rules take increase() of exist at zero, so the first failure is an
 * increase; names follow Prometheus's rules; no value is negative.
 */

const db = useTestDatabase();

/** The samples of an exposition, `name{labels}` -> value. */
function samples(exposition: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of exposition.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    found.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return found;
}

/** The counter series one webhook is expected to have from the start. */
function seriesAtZero(webhook: string, mirror: boolean): string[] {
  return [
    ...['delivered', 'retry', 'rejected', 'retries_exhausted', 'expired'].map(
      (outcome) => `asset_webhooks_delivery_attempts_total{webhook="${webhook}",outcome="${outcome}"}`,
    ),
    `asset_webhooks_secret_resolution_failures_total{webhook="${webhook}"}`,
    `asset_webhooks_delivery_local_faults_total{webhook="${webhook}"}`,
    `asset_webhooks_delivery_duration_seconds_count{webhook="${webhook}"}`,
    ...(mirror
      ? [
          `asset_webhooks_reconciles_total{webhook="${webhook}",outcome="completed"}`,
          `asset_webhooks_reconciles_total{webhook="${webhook}",outcome="failed"}`,
          `asset_webhooks_reconcile_events_total{webhook="${webhook}",type="EDITED"}`,
          `asset_webhooks_reconcile_events_total{webhook="${webhook}",type="UNMATCHED"}`,
        ]
      : []),
  ];
}

describe('/metrics before the first event', () => {
  let running: TestService | undefined;
  afterAll(async () => {
    await running?.stop();
  });

  it("serves every webhook's attempt, secret and reconcile counters at zero, and a reloaded document's new webhooks' too", async () => {
    // Receivers that are never reached: no event is made, so no attempt either.
    const plain: TestWebhook = { id: 'crm', url: 'http://127.0.0.1:9/crm' };
    const mirror: TestWebhook = {
      id: 'shop',
      url: 'http://127.0.0.1:9/shop',
      mirror: true,
      eventTypes: ['Created', 'Edited', 'Deleted', 'Purged'],
    };
    const port = await freePort();
    running = await startTestService(db.url, receiverConfig([plain, mirror], { intervalSeconds: 3600 }), {
      httpPort: port,
    });
    const scrape = async (): Promise<Map<string, number>> =>
      samples(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());

    const before = await scrape();
    for (const series of [...seriesAtZero('crm', false), ...seriesAtZero('shop', true)])
      expect(before.get(series), series).toBe(0);
    // Reconciles belong to mirror webhooks only.
    expect([...before.keys()].filter((series) => series.includes('reconcile') && series.includes('"crm"'))).toEqual([]);
    for (const outcome of ['applied', 'refused'])
      expect(before.get(`asset_webhooks_config_reloads_total{outcome="${outcome}"}`), outcome).toBe(0);
    for (const route of ['deliver', 'collapsed', 'disabled', 'asset_gone', 'in_trash', 'excluded', 'unmatched'])
      expect(before.get(`asset_webhooks_event_routes_total{route="${route}"}`), route).toBe(0);

    const added: TestWebhook = { ...mirror, id: 'archive', url: 'http://127.0.0.1:9/archive' };
    running.writeConfig(receiverConfig([plain, mirror, added], { intervalSeconds: 3600 }));
    expect(await running.service.reload()).toBe(true);
    // One rendering of /metrics serves the scrapes of a second: wait for one made after the reload.
    const after = await eventually(
      async () => {
        const current = await scrape();
        return current.get('asset_webhooks_config_reloads_total{outcome="applied"}') === 1 ? current : undefined;
      },
      { timeoutMs: 10_000, what: 'a rendering of /metrics after the reload' },
    );
    for (const series of [
      ...seriesAtZero('crm', false),
      ...seriesAtZero('shop', true),
      ...seriesAtZero('archive', true),
    ])
      expect(after.get(series), series).toBe(0);
  }, 60_000);
});

describe('ServiceMetrics', () => {
  it('never serves a negative age of the database values, also on the scrape that reads them anew', async () => {
    // Refreshed at every scrape: each one reads the values and then reports their age.
    const metrics = new ServiceMetrics(db.pool, () => 0);
    for (let scrape = 0; scrape < 10; scrape++) {
      const age = samples(await metrics.registry.metrics()).get('asset_webhooks_database_values_age_seconds');
      expect(age, `scrape ${scrape}`).toBeGreaterThanOrEqual(0);
    }
  });

  it('names gauges and counters as Prometheus asks: _total for counters only, no repeated prefix', async () => {
    const exposition = await new ServiceMetrics(db.pool).registry.metrics();
    const types = [...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => ({ name: name!, type }));
    expect(types.length).toBeGreaterThan(40);
    const misnamed = types.filter(({ name, type }) => (type === 'counter') !== name.endsWith('_total'));
    expect(misnamed).toEqual([]);
    expect(types.filter(({ name }) => !name.startsWith('asset_webhooks_'))).toEqual([]);
    expect(types.filter(({ name }) => name.includes('process_process_'))).toEqual([]);
    // prom-client's process metrics, under the service's prefix once.
    expect(types).toContainEqual({ name: 'asset_webhooks_process_cpu_seconds_total', type: 'counter' });
    expect(types).toContainEqual({ name: 'asset_webhooks_nodejs_active_handles', type: 'gauge' });
  });
});
