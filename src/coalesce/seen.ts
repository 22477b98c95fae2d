import type { AssetState } from '../interfaces.js';
import type { RoutedWebhook } from './route.js';

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
  }

  /**
   * The seen_ members of an event's JSON document (see consumeEvents), each
   * followed by a comma; `asset` null when the asset was gone. Empty lists
   * are null.
   */
  json(asset: AssetState | null): string {
    if (asset === null) return '"asset_gone":true,';
    // Absent members are null columns.
    let json = `"seen_supertype":${JSON.stringify(asset.supertype)},`;
    if (asset.parentId !== null) json += `"seen_parent_id":${scalar(asset.parentId)},`;
    if (this.state && asset.state !== null) json += `"seen_state":${JSON.stringify(asset.state)},`;
    if (this.schemaId && asset.schemaId !== null) json += `"seen_schema_id":${scalar(asset.schemaId)},`;
    if (this.typeId && asset.typeId !== null) json += `"seen_type_id":${scalar(asset.typeId)},`;
    if (this.domainId && asset.domainId !== null) json += `"seen_domain_id":${scalar(asset.domainId)},`;
    if (this.keywords && asset.keywords.length > 0) json += `"seen_keywords":${JSON.stringify(asset.keywords)},`;
    if (this.allFields || this.fieldNames.size > 0) {
      const names: string[] = [];
      const values: string[] = [];
      for (let i = 0; i < asset.fieldNames.length; i += 1) {
        if (this.allFields || this.fieldNames.has(asset.fieldNames[i]!)) {
          names.push(asset.fieldNames[i]!);
          values.push(asset.fieldValues[i]!);
        }
      }
      if (names.length > 0)
        json += `"seen_field_names":${JSON.stringify(names)},"seen_field_values":${JSON.stringify(values)},`;
    }
    return json;
  }
}

/** A number as a JSON number, a string as a JSON string (ids may come as either). */
function scalar(value: string | number): string {
  return typeof value === 'number' ? String(value) : JSON.stringify(value);
}
