import type { AssetState } from '../interfaces.js';
import { ASSET_GONE, type SeenRow } from '../payloads/seen-row.js';
import type { StateReads } from './claim.js';
import type { RoutedWebhook } from './routed-webhooks.js';

/**
 * What routing saw of an asset, stored once per event (asset_webhooks.events,
 * the seen_ columns) so that the check excluding it from any webhook can be
 * derived later (asset_webhooks.excluding_check) instead of being written per
 * webhook. The supertype and parent are always kept (every enabled webhook
 * checks them); the other values only when some enabled webhook filters on
 * them, additional fields only as far as such filters read them (all of them
 * when a group has no fieldName). Disabled webhooks read nothing: they exclude
 * by `disabled`.
 */
export class SeenValues {
  /** Which single values some enabled webhook's filters read. */
  private readonly state: boolean;
  private readonly schemaId: boolean;
  private readonly typeId: boolean;
  private readonly domainId: boolean;
  private readonly keywords: boolean;
  private readonly allFields: boolean;
  private readonly fieldNames: ReadonlySet<string>;
  /** Which of an asset's lists some enabled webhook's filters read: the others need not be read at all. */
  readonly reads: StateReads;

  constructor(webhooks: readonly RoutedWebhook[]) {
    const groups = webhooks.filter((webhook) => webhook.enabled).flatMap((webhook) => webhook.filters);
    const reads = (kind: string): boolean => groups.some((group) => group.filterKind === kind);
    this.state = reads('state');
    this.schemaId = reads('schemaId');
    this.typeId = reads('typeId');
    this.domainId = reads('domainId');
    this.keywords = reads('keywords');
    const fields = groups.filter((group) => group.filterKind === 'additionalFields');
    this.allFields = fields.some((group) => group.fieldName === undefined);
    this.fieldNames = new Set(fields.flatMap((group) => (group.fieldName === undefined ? [] : [group.fieldName])));
    this.reads = { keywords: this.keywords, fields: fields.length > 0 };
  }

  /**
   * What routing saw of `asset` as the events row stores it; `asset` null
   * when the asset was gone. Values no enabled check reads, and empty lists,
   * are null.
   */
  of(asset: AssetState | null): SeenRow {
    if (asset === null) return ASSET_GONE;
    let names: string[] | null = null;
    let values: string[] | null = null;
    if (this.allFields || this.fieldNames.size > 0) {
      for (let i = 0; i < asset.fieldNames.length; i += 1) {
        if (this.allFields || this.fieldNames.has(asset.fieldNames[i]!)) {
          (names ??= []).push(asset.fieldNames[i]!);
          (values ??= []).push(asset.fieldValues[i]!);
        }
      }
    }
    return {
      asset_gone: false,
      seen_supertype: asset.supertype,
      seen_parent_id: asset.parentId,
      seen_state: this.state ? asset.state : null,
      seen_schema_id: this.schemaId ? asset.schemaId : null,
      seen_type_id: this.typeId ? asset.typeId : null,
      seen_domain_id: this.domainId ? asset.domainId : null,
      seen_keywords: this.keywords && asset.keywords.length > 0 ? asset.keywords : null,
      seen_field_names: names,
      seen_field_values: values,
    };
  }
}
