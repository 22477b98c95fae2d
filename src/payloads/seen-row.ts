import type { DecimalId } from '../interfaces.js';

/**
 * The seen_ columns of one asset_webhooks.events row, and asset_gone (named
 * as the columns, so a row can be written as it is). Every member is always
 * present: one shape for every event.
 */
export interface SeenRow {
  readonly asset_gone: boolean;
  readonly seen_supertype: string | null;
  readonly seen_parent_id: DecimalId | null;
  readonly seen_state: string | null;
  readonly seen_schema_id: DecimalId | null;
  readonly seen_type_id: DecimalId | null;
  readonly seen_domain_id: DecimalId | null;
  readonly seen_keywords: readonly string[] | null;
  readonly seen_field_names: readonly string[] | null;
  readonly seen_field_values: readonly string[] | null;
}

/** What is stored of an event no check reads (collapsed, PURGED): nothing. */
export const NOTHING_SEEN: SeenRow = {
  asset_gone: false,
  seen_supertype: null,
  seen_parent_id: null,
  seen_state: null,
  seen_schema_id: null,
  seen_type_id: null,
  seen_domain_id: null,
  seen_keywords: null,
  seen_field_names: null,
  seen_field_values: null,
};

/** What is stored of an event whose asset was gone. */
export const ASSET_GONE: SeenRow = { ...NOTHING_SEEN, asset_gone: true };
