#!/usr/bin/env node
// Filter evaluations per second for 10 and 1,000 webhooks (a micro-benchmark,
// not a test): `npm run build && node scripts/filters-bench.js`.
import { parseConfigText } from '../dist/config/load.js';
import { compileWebhook } from '../dist/filters/compile.js';

const kinds = [
  '',
  'resourceTypes: [Resource, Project]',
  'eventTypes: [Created, Purged]',
  'filters: [ { filterKind: keywords, condition: ANY, value: [summer, winter] } ]',
  'filters: [ { filterKind: keywords, condition: NONE, value: [archive] }, { filterKind: state, condition: ANY, value: [approved] } ]',
  'filters: [ { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026"] } ]',
  'filters: [ { filterKind: schemaId, condition: ANY, value: ["1", "2"] } ]',
  'filters: [ { filterKind: parentId, condition: ANY, value: ["null"] }, { filterKind: domainId, condition: NONE, value: ["0"] } ]',
];
const types = ['CREATED', 'EDITED', 'DELETED', 'REVERSION'];
const assets = Array.from({ length: 1000 }, (_, i) => ({
  assetId: i, assetUuid: 'u', supertype: i % 10 === 0 ? 'Project' : 'Resource', parentId: i % 4 === 0 ? 7 : null,
  state: ['draft', 'approved', null][i % 3], schemaId: i % 5, typeId: i % 7, domainId: i % 3, latestAtomId: i,
  keywords: [['summer'], ['winter', 'product'], [], ['archive']][i % 4], fieldNames: ['campaign', 'region'], fieldValues: [String(2020 + (i % 8)), 'emea'],
}));

for (const count of [10, 1000]) {
  const lines = Array.from({ length: count }, (_, i) => `    - { id: w${i}, url: "https://r.example/${i}", enabled: true${kinds[i % kinds.length] ? `, ${kinds[i % kinds.length]}` : ''} }`);
  const webhooks = parseConfigText(`assetUpdater:\n  webhooks:\n${lines.join('\n')}\n`, 'bench').assetUpdater.webhooks.map(compileWebhook);
  const rates = [];
  for (let repeat = 0; repeat < 5; repeat += 1) {
    let evaluations = 0;
    let passed = 0;
    const started = process.hrtime.bigint();
    while (Number(process.hrtime.bigint() - started) < 1e9) {
      for (let a = 0; a < assets.length; a += 1) {
        const type = types[a % types.length];
        for (const webhook of webhooks) if (webhook.evaluate(type, assets[a]) === null) passed += 1;
        evaluations += webhooks.length;
      }
    }
    rates.push(evaluations / (Number(process.hrtime.bigint() - started) / 1e9));
    if (passed === 0) throw new Error('nothing passed: the benchmark would measure nothing');
  }
  rates.sort((x, y) => x - y);
  console.log(`${count} webhooks: ${Math.round(rates[2]).toLocaleString('en-US')} evaluations/s (median of 5, min ${Math.round(rates[0]).toLocaleString('en-US')}, max ${Math.round(rates[4]).toLocaleString('en-US')})`);
}
