import type { AssetState } from '../../src/interfaces.js';
import { parseConfigText } from '../../src/config/load.js';
import type { WebhookConfig } from '../../src/config/schema.js';

/** A top-level Resource with nothing set, overridden as the test needs. */
export function asset(overrides: Partial<AssetState> = {}): AssetState {
  return {
    assetId: '1',
    assetUuid: '00000000-0000-4000-8000-000000000001',
    supertype: 'Resource',
    parentId: null,
    state: null,
    schemaId: null,
    typeId: null,
    domainId: null,
    latestAtomId: null,
    keywords: [],
    fieldNames: [],
    fieldValues: [],
    ...overrides,
  };
}

/** One webhook parsed through the real configuration schema (so defaults apply as in production). */
export function webhook(yamlFields: string): WebhookConfig {
  const config = parseConfigText(
    `assetUpdater:\n  webhooks:\n    - { url: "https://receiver.example/hook", enabled: true${yamlFields ? `, ${yamlFields}` : ''} }\n`,
    'test',
  );
  return config.assetUpdater.webhooks[0]!;
}
