import { z } from 'zod';
import { nonEmptyString, storableString } from './primitives.js';

export const FILTER_KINDS = [
  'keywords',
  'additionalFields',
  'state',
  'schemaId',
  'typeId',
  'domainId',
  'parentId',
] as const;
export type FilterKind = (typeof FILTER_KINDS)[number];
export const CONDITIONS = ['AND', 'ANY', 'NONE'] as const;
export type Condition = (typeof CONDITIONS)[number];

/** The filter kinds whose values are numbers, written as decimal strings. */
const NUMERIC_KINDS: ReadonlySet<string> = new Set(['schemaId', 'typeId', 'domainId', 'parentId']);
/** How an asset's number reads as a string, decimal without leading zeros: "007" would never match. */
const DECIMAL = /^(0|[1-9][0-9]*)$/;

/** One entry of a webhook's `filters` (docs/configuration.md, filter semantics). */
export const filterGroup = z
  .strictObject({
    filterKind: z.enum(FILTER_KINDS, { error: `expected one of ${FILTER_KINDS.join(', ')}` }),
    condition: z.enum(CONDITIONS, { error: `expected one of ${CONDITIONS.join(', ')}` }),
    value: z
      .array(storableString('expected a string (quote numbers: "2026")'), { error: 'expected a list of strings' })
      .min(1, { error: 'expected at least one value' }),
    /** Only for additionalFields: match only fields of this name. */
    fieldName: nonEmptyString.optional(),
  })
  // Runs even when other parts of the group are invalid (a number among the
  // values, say), so that every problem of the group is reported at once.
  .superRefine(
    (group, context) => {
      const kind: unknown = group.filterKind;
      if (
        group.fieldName !== undefined &&
        typeof kind === 'string' &&
        kind !== 'additionalFields' &&
        FILTER_KINDS.includes(kind as FilterKind)
      ) {
        context.addIssue({
          code: 'custom',
          path: ['fieldName'],
          input: group.fieldName,
          message: `expected no fieldName on a ${kind} filter (only additionalFields takes one)`,
        });
      }
      if (typeof kind === 'string' && NUMERIC_KINDS.has(kind) && Array.isArray(group.value)) {
        (group.value as unknown[]).forEach((value, index) => {
          if (typeof value !== 'string') return;
          if (!DECIMAL.test(value) && !(kind === 'parentId' && value === 'null')) {
            context.addIssue({
              code: 'custom',
              path: ['value', index],
              input: value,
              message: `expected a string of digits without leading zeros${kind === 'parentId' ? ' or "null"' : ''}`,
            });
          }
        });
      }
    },
    { when: (payload) => payload.value !== null && typeof payload.value === 'object' },
  );
