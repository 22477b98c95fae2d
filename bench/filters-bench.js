#!/usr/bin/env node
// Filter evaluations per event, and events routed per second, against 10, 100
// and 1,000 webhooks (a micro-benchmark, not a test):
// `npm run build && node bench/filters-bench.js`.
//
// One evaluation = one event checked against one webhook's compiled checks
// (src/filters/compile.ts). Without the index every event is evaluated against
// every webhook; the routing index (src/filters/routing-index.ts) evaluates it
// only against the webhooks it could reach. Two configurations: `mixed` cycles
// webhook shapes from no options to several filter groups; `tenants` gives
// each webhook `domainId ANY [its own]`, the assets spread over 1,000 domains.
import { parseConfigText } from '../dist/config/load.js';
import { compileWebhook } from '../dist/filters/compile.js';
import { RoutingIndex } from '../dist/filters/routing-index.js';

const mixedShapes = [
  '',
  'resourceTypes: [Resource, Project]',
  'eventTypes: [Created, Purged]',
  'filters: [ { filterKind: keywords, condition: ANY, value: [summer, winter] } ]',
  'filters: [ { filterKind: keywords, condition: NONE, value: [archive] }, { filterKind: state, condition: ANY, value: [approved] } ]',
  'filters: [ { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026"] } ]',
  'filters: [ { filterKind: schemaId, condition: ANY, value: ["1", "2"] } ]',
  'filters: [ { filterKind: parentId, condition: ANY, value: ["null", "7"] }, { filterKind: domainId, condition: NONE, value: ["0"] }, { filterKind: typeId, condition: ANY, value: ["1", "3", "5"] } ]',
];
const DOMAINS = 1000;
const configurations = {
  mixed: (i) => mixedShapes[i % mixedShapes.length],
  // Tenant i of n owns the domains d with d % n == i: each event reaches one webhook whatever n.
  tenants: (i, n) =>
    `filters: [ { filterKind: domainId, condition: ANY, value: [${Array.from({ length: DOMAINS / n }, (_, k) => `"${i + k * n}"`).join(', ')}] } ]`,
};
const types = ['CREATED', 'EDITED', 'DELETED', 'REVERSION', 'EDITED', 'PURGED'];
const assets = Array.from({ length: 5000 }, (_, i) => ({
  assetId: String(i),
  assetUuid: 'u',
  supertype: i % 10 === 0 ? 'Project' : 'Resource',
  parentId: i % 4 === 0 ? '7' : null,
  state: ['draft', 'approved', null][i % 3],
  schemaId: String(i % 5),
  typeId: String(i % 7),
  domainId: String((i * 7919) % DOMAINS),
  latestAtomId: String(i),
  keywords: [['summer'], ['winter', 'product'], [], ['archive']][i % 4],
  fieldNames: ['campaign', 'region'],
  fieldValues: [String(2020 + (i % 8)), 'emea'],
}));

/** Events routed per second by `route` over every asset, median of three one-second runs. */
function measure(route) {
  const rates = [];
  for (let repeat = 0; repeat < 3; repeat += 1) {
    let events = 0;
    const started = process.hrtime.bigint();
    while (Number(process.hrtime.bigint() - started) < 1e9) {
      for (let a = 0; a < assets.length; a += 1) route(types[a % types.length], assets[a]);
      events += assets.length;
    }
    rates.push(events / (Number(process.hrtime.bigint() - started) / 1e9));
  }
  rates.sort((x, y) => x - y);
  return rates[1];
}

const format = (n, width = 10) => Math.round(n).toLocaleString('en-US').padStart(width);

for (const [name, shape] of Object.entries(configurations)) {
  for (const count of [10, 100, 1000]) {
    const lines = Array.from(
      { length: count },
      (_, i) =>
        `    - { id: w${i}, url: "https://r.example/${i}", enabled: true${shape(i, count) ? `, ${shape(i, count)}` : ''} }`,
    );
    const webhooks = parseConfigText(`assetUpdater:\n  webhooks:\n${lines.join('\n')}\n`, 'bench').assetUpdater
      .webhooks;
    const compiled = webhooks.map(compileWebhook);
    const index = new RoutingIndex(webhooks);
    let delivered = 0;
    let deliveredAll = 0;
    for (let a = 0; a < assets.length; a += 1) {
      delivered += index.deliveringTo(types[a % types.length], assets[a]).length;
      for (const webhook of compiled)
        if (webhook.evaluate(types[a % types.length], assets[a]) === null) deliveredAll += 1;
    }
    if (delivered !== deliveredAll)
      throw new Error(`the index delivered ${delivered} routes, evaluating every webhook ${deliveredAll}`);
    const perEvent = index.evaluations / assets.length;
    const allRate = measure((type, asset) => {
      for (let w = 0; w < compiled.length; w += 1) compiled[w].evaluate(type, asset);
    });
    const indexRate = measure((type, asset) => index.deliveringTo(type, asset));
    console.log(
      `${name.padEnd(7)} ${String(count).padStart(5)} webhooks: evaluations per event ${perEvent.toFixed(2).padStart(7)} with the index, ${String(count).padStart(5)} without;` +
        ` deliveries per event ${(delivered / assets.length).toFixed(2).padStart(6)}; events/s ${format(indexRate)} with the index, ${format(allRate)} without`,
    );
  }
}
