import { isNode, isPair, isScalar, isSeq, LineCounter, visit, type Document, type YAMLError } from 'yaml';
import type { z } from 'zod';
import { printable, quotedPrefix } from '../text/printable.js';
import { Found } from './schema.js';

/** One line for an error of the YAML parser, placed at its line and column. */
export function lineOfParseError(error: YAMLError, lineCounter: LineCounter, sourceName: string): string {
  const position = lineCounter.linePos(error.pos[0]);
  const where = `${sourceName}:${position.line}:${position.col}`;
  if (error.code === 'MULTIPLE_DOCS') return `${where}: expected a single YAML or JSON document, got a second one`;
  const found = printable(error.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, ''));
  return `${where}: expected valid YAML or JSON, got ${found.length > 120 ? `${found.slice(0, 117)}...` : found}`;
}

/** Problem lines listed for one document; past them, one line says how many more there are. */
export const MAX_PROBLEM_LINES = 100;

/**
 * The first MAX_PROBLEM_LINES problems and a line counting the rest: a
 * document of thousands of wrong values would otherwise write thousands of
 * lines to the terminal, or to the log at every reload.
 */
export function firstProblems(lines: readonly string[], sourceName: string, total = lines.length): string[] {
  if (total <= MAX_PROBLEM_LINES) return [...lines];
  return [
    ...lines.slice(0, MAX_PROBLEM_LINES),
    `${sourceName}: expected at most ${MAX_PROBLEM_LINES} problems to list, got ${total}; ${total - MAX_PROBLEM_LINES} more are not shown (fix these and check again)`,
  ];
}

/**
 * Where an issue's path points in the document, so that the lines read top to
 * bottom (zod reports a list's own checks, such as duplicate ids, after its
 * entries' problems). A path that exists sorts at its node's start; a missing
 * key at the end of its nearest existing ancestor.
 */
export function issueOffset(issue: z.core.$ZodIssue, document: Document.Parsed): number {
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, ...issue.keys.slice(0, 1)] : issue.path;
  for (let length = path.length; length > 0; length -= 1) {
    const node = document.getIn(path.slice(0, length), true);
    if (isNode(node) && node.range) return length === path.length ? node.range[0] : node.range[1];
  }
  return 0;
}

/**
 * A key written twice in one mapping, one line each at the second key: YAML
 * would keep only one of the two values, silently.
 */
export function duplicateKeyProblems(
  document: Document.Parsed,
  lineCounter: LineCounter,
  sourceName: string,
): string[] {
  const problems: string[] = [];
  visit(document, {
    Map(_, map) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        if (!isScalar(pair.key)) continue;
        const key = String(pair.key.value);
        if (!seen.has(key)) {
          seen.add(key);
          continue;
        }
        const position = pair.key.range ? lineCounter.linePos(pair.key.range[0]) : undefined;
        const where = position ? `${sourceName}:${position.line}:${position.col}` : sourceName;
        problems.push(`${where}: expected each key once in a mapping, got ${quotedPrefix(key)} a second time`);
      }
    },
  });
  return problems;
}

/**
 * Keys that YAML reads as null (`null:`, `~:` or nothing before the colon).
 * Converted to plain data they would become the key "", and the schema would
 * name them as an unknown key "" that appears nowhere in the document.
 */
export function nullKeyProblems(
  document: Document.Parsed,
  sourceName: string,
): Array<{ path: PropertyKey[]; at: number; line: string }> {
  const problems: Array<{ path: PropertyKey[]; at: number; line: string }> = [];
  visit(document, {
    Pair(_, pair, ancestors) {
      if (pair.key !== null && !(isScalar(pair.key) && pair.key.value === null)) return;
      const path: PropertyKey[] = [];
      ancestors.forEach((node, index) => {
        if (isPair(node)) path.push(isScalar(node.key) ? String(node.key.value) : String(node.key));
        else if (isSeq(node)) path.push(node.items.indexOf(ancestors[index + 1] as (typeof node.items)[number]));
      });
      const source = isScalar(pair.key) ? pair.key.source : undefined;
      const where = formatPath(path) || sourceName;
      const written = isNode(pair.key) ? pair.key : isNode(pair.value) ? pair.value : undefined;
      problems.push({
        path,
        at: written?.range?.[0] ?? 0,
        line: source
          ? `${where}: expected key names, got ${source}, which YAML reads as no name (write "${source}" to use the word as a key)`
          : `${where}: expected key names, got a key with no name before its colon`,
      });
    },
  });
  return problems;
}

/**
 * One line per problem, `<path>: <expected>, got <found>`, the path rooted at
 * the document (`assetUpdater.webhooks[1].url`); a problem with the document
 * as a whole is named by `sourceName`.
 */
export function formatIssues(issues: readonly z.core.$ZodIssue[], sourceName = '(document)'): string[] {
  // A value can fail two checks with the same message (a huge number is neither
  // an integer nor in range): one line is enough.
  return [
    ...new Set(
      issues.flatMap((issue) => {
        const path = formatPath(issue.path);
        if (issue.code === 'unrecognized_keys') {
          return issue.keys.map((key) => {
            const keyPath = formatPath([...issue.path, key]);
            const expected =
              issue.path.length === 0
                ? 'expected the root key "assetUpdater"'
                : 'expected no such key (check the spelling)';
            return `${keyPath}: ${expected}, got unknown key ${quotedPrefix(key)}`;
          });
        }
        const expected =
          issue.code === 'invalid_value'
            ? `expected one of ${issue.values.map(String).join(', ')}`
            : issue.message.startsWith('expected')
              ? issue.message
              : genericExpectation(issue);
        // A root that is not a mapping is no configuration document: its kind is said, never its content.
        const found = issue.path.length === 0 ? describeKind(issue.input) : describeInput(issue.input);
        return [`${path || sourceName}: ${expected}, got ${found}`];
      }),
    ),
  ];
}

function genericExpectation(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type') {
    if (issue.expected === 'object')
      return issue.path.length === 0 ? 'expected a mapping with the root key "assetUpdater"' : 'expected a mapping';
    return `expected ${issue.expected}`;
  }
  return `expected ${issue.message}`;
}

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && /^[A-Za-z_][A-Za-z0-9_]{0,39}$/.test(segment))
      out += out ? `.${segment}` : segment;
    else out += `[${quotedPrefix(String(segment))}]`;
  }
  return out;
}

function describeInput(input: unknown): string {
  if (input === undefined) return 'nothing';
  if (input instanceof Found) return input.description;
  if (Array.isArray(input)) return input.length === 0 ? 'an empty list' : `a list ${listPrefix(input)}`;
  if (input !== null && typeof input === 'object') return 'a mapping';
  // JSON would write null (1e400 in YAML is Infinity).
  if (typeof input === 'number' && !Number.isFinite(input)) return String(input);
  if (typeof input === 'string') return quotedPrefix(input);
  return String(JSON.stringify(input));
}

/** What a value is, without any of its content: a document's root that is not a mapping may be any file. */
function describeKind(input: unknown): string {
  if (typeof input === 'string') return `a text of ${Array.from(input).length} characters (not shown)`;
  if (Array.isArray(input)) return `a list of ${input.length} ${input.length === 1 ? 'entry' : 'entries'} (not shown)`;
  if (typeof input === 'number' || typeof input === 'boolean' || typeof input === 'bigint')
    return `a ${typeof input} (not shown)`;
  return describeInput(input);
}

/** A list as JSON, cut like quotedPrefix cuts a string (its first entries, escaped). */
function listPrefix(list: readonly unknown[]): string {
  const json = printable(JSON.stringify(list.slice(0, 40)) ?? '');
  return json.length > 40 || list.length > 40 ? `${json.slice(0, 40)}...` : json;
}
