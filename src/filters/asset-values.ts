import type { AssetState } from '../interfaces.js';
import type { FilterKind } from '../config/schema.js';

/**
 * The values a filter kind sees on an asset (docs/configuration.md, filter
 * groups): keywords and additional-field values are lists; state, schemaId,
 * typeId and domainId are single values as decimal strings, absent when null;
 * parentId of a top-level asset is the string "null".
 */
export function assetValues(asset: AssetState, kind: FilterKind, fieldName?: string): readonly string[] {
  switch (kind) {
    case 'keywords':
      return asset.keywords;
    case 'additionalFields':
      return fieldName === undefined
        ? asset.fieldValues
        : asset.fieldValues.filter((_, index) => asset.fieldNames[index] === fieldName);
    case 'state':
      return asset.state === null ? [] : [asset.state];
    case 'schemaId':
      return asset.schemaId === null ? [] : [String(asset.schemaId)];
    case 'typeId':
      return asset.typeId === null ? [] : [String(asset.typeId)];
    case 'domainId':
      return asset.domainId === null ? [] : [String(asset.domainId)];
    case 'parentId':
      return [asset.parentId === null ? 'null' : String(asset.parentId)];
  }
}
