// Writes deploy/kubernetes/prometheusrule.yaml: the rules of
// deploy/prometheus/alerts.yaml wrapped in a PrometheusRule for the Prometheus
// Operator, comments and all. Run it after editing alerts.yaml:
//
//   node scripts/kubernetes/prometheus-rule.mjs
//
// test/deploy/kubernetes.test.ts fails while the two files carry different rules.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { Document, parseDocument } from 'yaml';

const alertsPath = fileURLToPath(new URL('../../deploy/prometheus/alerts.yaml', import.meta.url));
const rulePath = fileURLToPath(new URL('../../deploy/kubernetes/prometheusrule.yaml', import.meta.url));

const alerts = parseDocument(readFileSync(alertsPath, 'utf8'));
if (alerts.errors.length) throw alerts.errors[0];
const rule = new Document({
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: { name: 'asset-webhooks', labels: { 'app.kubernetes.io/name': 'asset-webhooks' } },
  spec: {},
});
rule.setIn(['spec', 'groups'], alerts.get('groups', true));
rule.commentBefore = [
  ' Generated from deploy/prometheus/alerts.yaml by scripts/kubernetes/prometheus-rule.mjs:',
  ' edit that file and run the script. The Prometheus Operator selects rules by label',
  ' (kube-prometheus-stack: `release: <its release name>`); add it in an overlay when it does.',
].join('\n');
const options = { ...(await resolveConfig(rulePath)), filepath: rulePath };
writeFileSync(rulePath, await format(rule.toString({ lineWidth: 100 }), options));
process.stdout.write(`wrote ${rulePath}\n`);
