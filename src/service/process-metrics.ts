import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client's default metrics (process CPU, memory, file descriptors, the
 * event loop, the heap, GC) are served under this prefix, beside the
 * service's own: asset_webhooks_process_cpu_seconds_total,
 * asset_webhooks_nodejs_eventloop_lag_seconds. Their names begin with
 * `process_` or `nodejs_` already.
 */
const DEFAULT_METRICS_PREFIX = 'asset_webhooks_';

/**
 * Default metrics that are gauges named like counters, which Prometheus's
 * naming rules (and `promtool check metrics`) refuse: each is the sum over the
 * `type` label of the gauge of the same name without `_total`, which stays.
 */
const GAUGES_NAMED_AS_COUNTERS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/**
 * Registers prom-client's default metrics of the process in `registry`, under
 * DEFAULT_METRICS_PREFIX and without the gauges named like counters.
 */
export function registerProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: DEFAULT_METRICS_PREFIX });
  for (const name of GAUGES_NAMED_AS_COUNTERS) registry.removeSingleMetric(DEFAULT_METRICS_PREFIX + name);
}
