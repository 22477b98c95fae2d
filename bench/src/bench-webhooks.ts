import { parseConfigText } from '../../src/config/load.js';
import { routedWebhooks } from '../../src/coalesce/routed-webhooks.js';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';

/** Ten kinds of webhook with the filters operators use, repeated to reach `count`. */
const KINDS = [
  '{ resourceTypes: [Resource, Project] }',
  '{ }',
  '{ eventTypes: [Created, Purged] }',
  '{ filters: [ { filterKind: keywords, condition: ANY, value: [summer, winter] } ] }',
  '{ filters: [ { filterKind: keywords, condition: NONE, value: [archive] }, { filterKind: state, condition: ANY, value: [approved] } ] }',
  '{ filters: [ { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026"] } ] }',
  '{ filters: [ { filterKind: schemaId, condition: ANY, value: ["1", "2"] } ] }',
  '{ filters: [ { filterKind: parentId, condition: ANY, value: ["null"] }, { filterKind: domainId, condition: NONE, value: ["0"] } ] }',
  '{ resourceTypes: [Project], eventTypes: [Edited, Reversion] }',
  '{ filters: [ { filterKind: typeId, condition: ANY, value: ["3", "4"] }, { filterKind: keywords, condition: AND, value: [product] } ] }',
];

export function benchWebhooks(count: number): RoutedWebhook[] {
  const lines = Array.from({ length: count }, (_, i) => {
    const kind = KINDS[i % KINDS.length]!;
    return `    - { id: bench-${i}, url: "https://receiver.example/${i}", enabled: true, ${kind.slice(1, -1).trim()} }`.replace(
      ', }',
      ' }',
    );
  });
  const config = parseConfigText(`assetUpdater:\n  webhooks:\n${lines.join('\n')}\n`, 'benchmark webhooks');
  return routedWebhooks(config.assetUpdater.webhooks);
}
