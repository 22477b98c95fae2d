import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parser } from '@prometheus-io/lezer-promql';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * The shipped Prometheus rules and Grafana dashboard must parse with
 * Prometheus's own PromQL grammar and name only metrics that `run` serves:
 * the names come from a real service's GET /metrics, so renaming a metric
 * without the files breaks this test.
 */

const db = useTestDatabase();
const deployFile = (name: string): string =>
  readFileSync(fileURLToPath(new URL(`../../deploy/${name}`, import.meta.url)), 'utf8');

interface Expression {
  readonly where: string;
  readonly expr: string;
}

function alertExpressions(): Expression[] {
  const document = parse(deployFile('prometheus/alerts.yaml')) as {
    groups: { name: string; rules: { alert?: string; record?: string; expr: unknown }[] }[];
  };
  return document.groups.flatMap((group) =>
    group.rules.map((rule) => {
      expect(typeof rule.expr, `${group.name}/${rule.alert ?? rule.record}: expr`).toBe('string');
      return { where: `alerts.yaml ${rule.alert ?? rule.record}`, expr: rule.expr as string };
    }),
  );
}

/**
 * Every `expr` of the dashboard (panel targets), and the metric of each
 * `label_values(METRIC, LABEL)` variable query. Grafana's interval variables
 * stand where PromQL wants a duration: they are replaced by one before
 * parsing. Other variables (`$webhook`) may only appear inside label values.
 */
function dashboardExpressions(): Expression[] {
  const found: Expression[] = [];
  const walk = (node: unknown, where: string): void => {
    if (Array.isArray(node)) node.forEach((item, index) => walk(item, `${where}[${index}]`));
    else if (node !== null && typeof node === 'object') {
      // A datasource variable's query is a plugin type (`prometheus`), not PromQL.
      if ((node as { type?: unknown }).type === 'datasource') return;
      for (const [key, value] of Object.entries(node)) {
        if (key === 'expr' && typeof value === 'string')
          found.push({
            where: `asset-webhooks.json ${where}`,
            expr: value.replace(/\$__(rate_interval|interval|range)\b/g, '5m'),
          });
        else if ((key === 'query' || key === 'definition') && typeof value === 'string') {
          const labelValues = /^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$/.exec(value);
          expect(labelValues, `${where}.${key}: expected label_values(METRIC, LABEL), got ${value}`).not.toBeNull();
          found.push({ where: `asset-webhooks.json ${where}.${key}`, expr: labelValues![1]! });
        } else walk(value, `${where}.${key}`);
      }
    }
  };
  walk(JSON.parse(deployFile('grafana/asset-webhooks.json')), '');
  return found;
}

/** The metric names a PromQL expression selects; fails on any syntax error. */
function metricNames({ where, expr }: Expression): string[] {
  const names: string[] = [];
  const errors: string[] = [];
  parser.parse(expr).iterate({
    enter(node) {
      if (node.type.isError)
        errors.push(`at ${node.from}: ${JSON.stringify(expr.slice(Math.max(0, node.from - 20), node.to + 20))}`);
      if (node.name === 'VectorSelector') {
        const identifier = node.node.getChild('Identifier');
        expect(
          identifier,
          `${where}: expected a metric name in the selector ${expr.slice(node.from, node.to)}`,
        ).not.toBeNull();
        names.push(expr.slice(identifier!.from, identifier!.to));
      }
    },
  });
  expect(errors, `${where}: PromQL syntax errors in ${expr}`).toEqual([]);
  return names;
}

/** Series names a `# TYPE` line declares, with a histogram's _bucket, _sum and _count (declared even before the first sample). */
function servedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const match of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = match as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram' || type === 'summary')
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

describe('deploy/ monitoring files', () => {
  let running: TestService;
  let served: Set<string>;
  let exposition: string;

  beforeAll(async () => {
    const port = await freePort();
    running = await startTestService(db.url, 'assetUpdater:\n  intervalSeconds: 1\n  webhooks: []\n', {
      logger: pino({ level: 'silent' }),
      httpPort: port,
    });
    const response = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(response.status).toBe(200);
    exposition = await response.text();
    served = servedNames(exposition);
  }, 60_000);
  afterAll(async () => {
    await running?.stop();
  });

  it('serves the metrics this test reads names from', () => {
    expect(served).toContain('asset_webhooks_delivery_attempts_total');
    expect(served).toContain('asset_webhooks_delivery_duration_seconds_bucket');
  });

  it('refuses a syntax error and an unknown metric (the checks can fail)', () => {
    expect(() => metricNames({ where: 'test', expr: 'sum(rate(asset_webhooks_dead_letters[5m]) bogus' })).toThrow(
      /PromQL syntax errors/,
    );
    const names = metricNames({ where: 'test', expr: 'max(asset_webhooks_dead_letter) > 0' });
    expect(names.filter((name) => !served.has(name))).toEqual(['asset_webhooks_dead_letter']);
  });

  it.each([
    ['deploy/prometheus/alerts.yaml', alertExpressions],
    ['deploy/grafana/asset-webhooks.json', dashboardExpressions],
  ])('%s: every expression parses and names only metrics run serves', (_file, expressions) => {
    const all = expressions();
    expect(all.length).toBeGreaterThan(5);
    for (const expression of all) {
      const names = metricNames(expression);
      expect(names.length, `${expression.where}: selects no metric`).toBeGreaterThan(0);
      const unknown = names.filter((name) => !served.has(name));
      expect(unknown, `${expression.where}: metrics run does not serve`).toEqual([]);
    }
  });

  it('the dashboard can be provisioned from a file: every panel and query reads the datasource variable', () => {
    const text = deployFile('grafana/asset-webhooks.json');
    // File provisioning (the Grafana sidecar) resolves no __inputs: a ${DS_...} left would stay literal.
    expect(text).not.toMatch(/\$\{DS_/);
    const dashboard = JSON.parse(text) as {
      __inputs?: unknown;
      templating: { list: { name: string; type: string; query?: unknown; datasource?: unknown }[] };
      panels: { type: string; title?: string; datasource?: unknown; targets?: { datasource?: unknown }[] }[];
    };
    expect(dashboard.__inputs).toBeUndefined();
    const variable = dashboard.templating.list.find((candidate) => candidate.name === 'datasource');
    expect(variable).toMatchObject({ type: 'datasource', query: 'prometheus' });
    const viaVariable = { type: 'prometheus', uid: '${datasource}' };
    const panels = dashboard.panels.filter((panel) => panel.type !== 'row');
    expect(panels.length).toBeGreaterThan(5);
    for (const panel of panels) {
      expect(panel.datasource, `panel ${panel.title}`).toEqual(viaVariable);
      for (const target of panel.targets ?? [])
        expect(target.datasource, `panel ${panel.title}: target`).toEqual(viaVariable);
    }
    for (const other of dashboard.templating.list.filter((candidate) => candidate.type === 'query'))
      expect(other.datasource, `variable ${other.name}`).toEqual(viaVariable);
  });

  it('alerts on what the README says is worth an alert, and on receivers that fail', () => {
    const used = new Set(alertExpressions().flatMap(metricNames));
    for (const name of [
      'asset_webhooks_capture_errors',
      'asset_webhooks_capture_gaps',
      'asset_webhooks_dead_letters',
      'asset_webhooks_outbox_oldest_age_seconds',
      'asset_webhooks_outbox_backlog_rows',
      'asset_webhooks_oldest_transaction_age_seconds',
      'asset_webhooks_delivery_attempts_total',
    ])
      expect(used, name).toContain(name);
    const document = parse(deployFile('prometheus/alerts.yaml')) as {
      groups: { rules: { alert: string; labels: { severity: string }; annotations: { summary: string } }[] }[];
    };
    const rules = document.groups.flatMap((group) => group.rules);
    expect(new Set(rules.map((rule) => rule.alert)).size).toBe(rules.length);
    for (const rule of rules) {
      expect(['critical', 'warning', 'info'], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
    }
  });

  it('fires the outbox-age alert relative to the configured interval, served by every process', () => {
    // The service above runs with intervalSeconds: 1.
    expect(exposition).toMatch(/^asset_webhooks_interval_seconds 1$/m);
    const rule = alertExpressions().find((expression) => expression.where === 'alerts.yaml AssetWebhooksOutboxAge');
    expect(rule).toBeDefined();
    // The threshold side of the comparison reads the interval: no fixed age that an interval above it would exceed.
    const [, threshold] = rule!.expr.split(/\s>\s/);
    expect(threshold, rule!.expr).toBeDefined();
    expect(metricNames({ where: rule!.where, expr: threshold! })).toEqual(['asset_webhooks_interval_seconds']);
  });

  it('docs/operations.md gives the thresholds the rules use', () => {
    const operations = readFileSync(fileURLToPath(new URL('../../docs/operations.md', import.meta.url)), 'utf8');
    const row = (metric: string): string =>
      operations.split('\n').find((line) => line.startsWith(`| \`${metric}\``)) ?? `(no row for ${metric})`;
    const oldest = alertExpressions().find(
      (expression) => expression.where === 'alerts.yaml AssetWebhooksOldestTransaction',
    );
    const seconds = Number(/>\s*(\d+)\s*$/.exec(oldest!.expr)?.[1]);
    expect(seconds).toBeGreaterThan(0);
    expect(row('asset_webhooks_oldest_transaction_age_seconds')).toContain(`above ${seconds / 60} minutes`);
    expect(row('asset_webhooks_outbox_oldest_age_seconds')).toContain('two intervals plus 8 minutes');
  });
});
