import { randomUUID } from 'node:crypto';

/** The properties of command output that hold ids of the asset schema (DecimalId). */
const ID_KEYS: ReadonlySet<string> = new Set([
  'assetId',
  'atomId',
  'parentId',
  'schemaId',
  'typeId',
  'domainId',
  'latestAtomId',
]);
const DECIMAL = /^-?[0-9]+$/;

/**
 * JSON for `--json` output in which the asset schema's ids, held as decimal
 * text, are JSON numbers with exactly those digits, as in payload bodies: a
 * receiver's assetId and the one `trace --json` prints are the same text.
 * JSON.stringify cannot write a number from text (JSON.rawJSON is missing in
 * Node 20), so each id is first written as a string carrying a marker that no
 * other value contains (a fresh random one per call) and the marked strings are
 * then unquoted.
 */
export function stringifyWithExactIds(value: unknown): string {
  const marker = `\u0000${randomUUID()}:`;
  const json = JSON.stringify(value, (key, item: unknown) =>
    ID_KEYS.has(key) && typeof item === 'string' && DECIMAL.test(item) ? `${marker}${item}` : item,
  );
  const quotedMarker = JSON.stringify(marker).slice(1, -1);
  return json
    .split(`"${quotedMarker}`)
    .map((part, index) => (index === 0 ? part : part.replace(/^(-?[0-9]+)"/, '$1')))
    .join('');
}
