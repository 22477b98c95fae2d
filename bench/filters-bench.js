#!/usr/bin/env node
// Filter evaluations per second for 10 and 1,000 webhooks (a micro-benchmark,
// not a test): `npm run build && node bench/filters-bench.js`.
//
// One evaluation = one event checked against one webhook. Compiled is what the
// coalescer runs (src/filters/compile.ts); reference is the plain evaluation the
// property tests compare it with (src/filters/reference.ts), shown for scale.
import { parseConfigText } from '../dist/config/load.js';
import { compileWebhook } from '../dist/filters/compile.js';
import { referenceEvaluate } from '../dist/filters/reference.js';

// Webhook shapes, cycled: from no options to several filter groups. Most pass
// the resource, event and parent checks so that the filter groups do the work.
const shapes = [
  '',
  'resourceTypes: [Resource, Project]',
  'eventTypes: [Created, Purged]',
  'filters: [ { filterKind: keywords, condition: ANY, value: [summer, winter] } ]',
  'filters: [ { filterKind: keywords, condition: NONE, value: [archive] }, { filterKind: state, condition: ANY, value: [approved] } ]',
  'filters: [ { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026"] } ]',
  'filters: [ { filterKind: schemaId, condition: ANY, value: ["1", "2"] } ]',
  'filters: [ { filterKind: parentId, condition: ANY, value: ["null", "7"] }, { filterKind: domainId, condition: NONE, value: ["0"] }, { filterKind: typeId, condition: ANY, value: ["1", "3", "5"] } ]',
];
const types = ['CREATED', 'EDITED', 'DELETED', 'REVERSION', 'EDITED', 'PURGED'];
const assets = Array.from({ length: 1000 }, (_, i) => ({
  assetId: i, assetUuid: 'u', supertype: i % 10 === 0 ? 'Project' : 'Resource', parentId: i % 4 === 0 ? 7 : null,
  state: ['draft', 'approved', null][i % 3], schemaId: i % 5, typeId: i % 7, domainId: i % 3, latestAtomId: i,
  keywords: [['summer'], ['winter', 'product'], [], ['archive']][i % 4], fieldNames: ['campaign', 'region'], fieldValues: [String(2020 + (i % 8)), 'emea'],
}));

/** Evaluations per second of `evaluate` over every asset × webhook, median of `repeats` one-second runs. */
function measure(count, evaluate) {
  const rates = [];
  for (let repeat = 0; repeat < 3; repeat += 1) {
    let evaluations = 0;
    let passed = 0;
    const started = process.hrtime.bigint();
    while (Number(process.hrtime.bigint() - started) < 1e9) {
      for (let a = 0; a < assets.length; a += 1) {
        passed += evaluate(types[a % types.length], assets[a]);
        evaluations += count;
      }
    }
    rates.push(evaluations / (Number(process.hrtime.bigint() - started) / 1e9));
    if (passed === 0) throw new Error('nothing passed: the benchmark would measure nothing');
  }
  rates.sort((x, y) => x - y);
  return rates[1];
}

const format = (rate) => Math.round(rate).toLocaleString('en-US').padStart(12);

for (const count of [10, 1000]) {
  const lines = Array.from({ length: count }, (_, i) => `    - { id: w${i}, url: "https://r.example/${i}", enabled: true${shapes[i % shapes.length] ? `, ${shapes[i % shapes.length]}` : ''} }`);
  const webhooks = parseConfigText(`assetUpdater:\n  webhooks:\n${lines.join('\n')}\n`, 'bench').assetUpdater.webhooks;
  const compiled = webhooks.map(compileWebhook);
  const compiledRate = measure(count, (type, asset) => {
    let passed = 0;
    for (let w = 0; w < compiled.length; w += 1) if (compiled[w].evaluate(type, asset) === null) passed += 1;
    return passed;
  });
  const referenceRate = measure(count, (type, asset) => {
    let passed = 0;
    for (let w = 0; w < webhooks.length; w += 1) if (referenceEvaluate(webhooks[w], type, asset) === null) passed += 1;
    return passed;
  });
  console.log(`${String(count).padStart(5)} webhooks: compiled ${format(compiledRate)} evaluations/s, reference ${format(referenceRate)} evaluations/s (median of 3 one-second runs)`);
}
