import {
  isNode,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  visit,
  type Document,
  type YAMLError,
} from 'yaml';
import type { z } from 'zod';
import { describeError } from '../db/connect.js';
import { UserError } from '../errors.js';
import { readRegularFile, UnreadableFileError } from '../files/read-regular-file.js';
import { printable, quotedPrefix } from '../text/printable.js';
import { assertOrdinaryShape } from './document-limits.js';
import { configSchema, Found, MAX_DOCUMENT_BYTES, type Config, type WebhookConfig } from './schema.js';

/**
 * Parses and validates a configuration document (YAML or JSON). Throws a
 * UserError('config_invalid') listing every problem, one line each:
 * `<path>: <what was expected>, got <what was found>`.
 */
export function parseConfigText(text: string, sourceName: string): Config {
  // Before parsing: what a document costs to parse grows with its size, and no sensible one comes near.
  const size = Buffer.byteLength(text, 'utf8');
  if (size > MAX_DOCUMENT_BYTES) throw documentTooLarge(sourceName, size);
  assertOrdinaryShape(text, sourceName);
  // logLevel error: the library's warnings (a key that is a list, say) would
  // go to the process's stderr; such a key is refused by the schema instead.
  // uniqueKeys off: the library compares each key with every other key of its
  // mapping; duplicateKeyProblems does the same check in one pass.
  const lineCounter = new LineCounter();
  // prettyErrors off: the library would copy lines of the source around every
  // error, each a pass over it; the first errors are placed here instead.
  // resolveKnownTags off: YAML 1.1's !!omap, !!set and !!pairs compare every
  // entry with every other; a configuration has no use for them, and such a
  // tagged collection is read as a plain one (and refused by the schema).
  const document = parseDocument(text, {
    prettyErrors: false,
    uniqueKeys: false,
    resolveKnownTags: false,
    logLevel: 'error',
    lineCounter,
  });
  if (document.errors.length > 0) {
    const shown = document.errors.slice(0, MAX_PROBLEM_LINES);
    throw new UserError(
      'config_invalid',
      firstProblems(
        shown.map((error) => lineOfParseError(error, lineCounter, sourceName)),
        sourceName,
        document.errors.length,
      ),
    );
  }
  const duplicates = duplicateKeyProblems(document, lineCounter, sourceName);
  if (duplicates.length > 0) throw new UserError('config_invalid', firstProblems(duplicates, sourceName));
  const nullKeys = nullKeyProblems(document, sourceName);
  let data: unknown;
  try {
    data = document.toJS();
  } catch (error) {
    const message = describeError(error);
    if (message.startsWith('Unresolved alias')) {
      throw new UserError(
        'config_invalid',
        `${sourceName}: expected every alias to name an anchor set before it, got Unresolved alias ${quotedPrefix(message.replace(/^[^:]*: /, ''))}`,
        { cause: error },
      );
    }
    // An alias expanding beyond the library's limit (a "billion laughs" document).
    throw new UserError(
      'config_invalid',
      `${sourceName}: expected a YAML document of ordinary size, got ${quotedPrefix(message)}`,
      {
        cause: error,
      },
    );
  }
  if (data === null || data === undefined) {
    throw new UserError(
      'config_invalid',
      `${sourceName}: expected a document with the root key "assetUpdater", got an empty document`,
    );
  }
  const result = configSchema.safeParse(data, { reportInput: true });
  if (result.success && nullKeys.length === 0) return result.data;
  // A null key reaches the schema as the key "": its own line replaces what the schema says of "".
  const nullKeyPaths = new Set(nullKeys.map((problem) => formatPath(problem.path)));
  const aboutNullKey = (path: readonly PropertyKey[]): boolean =>
    path.some((segment, index) => segment === '' && nullKeyPaths.has(formatPath(path.slice(0, index))));
  const issues = (result.success ? [] : result.error.issues).flatMap((issue) => {
    if (issue.code === 'unrecognized_keys' && nullKeyPaths.has(formatPath(issue.path))) {
      const keys = issue.keys.filter((key) => key !== '');
      return keys.length === 0 ? [] : [{ ...issue, keys }];
    }
    return aboutNullKey(issue.path) ? [] : [issue];
  });
  // Every line in document order: the null keys where they are written, the schema's issues where their paths point.
  const lines = [
    ...nullKeys.map((problem, index) => ({ at: problem.at, index, lines: [problem.line] })),
    ...issues.map((issue, index) => ({
      at: issueOffset(issue, document),
      index: nullKeys.length + index,
      lines: formatIssues([issue], sourceName),
    })),
  ].sort((a, b) => a.at - b.at || a.index - b.index);
  throw new UserError('config_invalid', firstProblems([...new Set(lines.flatMap((entry) => entry.lines))], sourceName));
}

/** One line for an error of the YAML parser, placed at its line and column. */
function lineOfParseError(error: YAMLError, lineCounter: LineCounter, sourceName: string): string {
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
function firstProblems(lines: readonly string[], sourceName: string, total = lines.length): string[] {
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
function issueOffset(issue: z.core.$ZodIssue, document: Document.Parsed): number {
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
function duplicateKeyProblems(document: Document.Parsed, lineCounter: LineCounter, sourceName: string): string[] {
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
function nullKeyProblems(
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

/** Reads and validates a configuration file. */
export async function loadConfigFile(file: string): Promise<Config> {
  return parseConfigText((await readConfigBytes(file)).toString('utf8'), file);
}

/**
 * The bytes of a configuration file, read only when it is a regular file of at
 * most MAX_DOCUMENT_BYTES (see readRegularFile: a device, a FIFO, a directory
 * or a huge file at the path is refused without being read, and nothing
 * waits on it). Throws a UserError `config_unreadable` (missing, not
 * permitted, not a regular file) or `config_invalid` (too large).
 */
export async function readConfigBytes(file: string): Promise<Buffer> {
  try {
    return await readRegularFile(file, MAX_DOCUMENT_BYTES);
  } catch (error) {
    if (error instanceof UnreadableFileError && error.reason === 'too_large') {
      throw new UserError(
        'config_invalid',
        `${file}: expected a configuration document of at most ${MAX_DOCUMENT_BYTES} bytes (4 MiB), got ${error.found}`,
      );
    }
    if (error instanceof UnreadableFileError) {
      throw new UserError(
        'config_unreadable',
        `${file}: expected a regular file (the path may be a symbolic link to one), got ${error.found}, which is not read`,
      );
    }
    throw new UserError(
      'config_unreadable',
      `${file}: expected a readable configuration file, got ${describeError(error)}`,
      { cause: error },
    );
  }
}

function documentTooLarge(sourceName: string, size: number): UserError {
  return new UserError(
    'config_invalid',
    `${sourceName}: expected a configuration document of at most ${MAX_DOCUMENT_BYTES} bytes (4 MiB), got ${size} bytes`,
  );
}

/**
 * The configuration file named by --config, else by the environment variable
 * ASSET_WEBHOOKS_CONFIG (read here, at the command line's edge, never in the
 * schema). Neither: a UserError naming both.
 */
export function configFromEnvOrOption(option?: string): string {
  const file = option ?? process.env.ASSET_WEBHOOKS_CONFIG;
  if (!file) {
    throw new UserError(
      'config_missing',
      '--config: expected a configuration file (or the environment variable ASSET_WEBHOOKS_CONFIG), got nothing',
    );
  }
  return file;
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
        return [`${path || sourceName}: ${expected}, got ${describeInput(issue.input)}`];
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

function formatPath(path: readonly PropertyKey[]): string {
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

/** A list as JSON, cut like quotedPrefix cuts a string (its first entries, escaped). */
function listPrefix(list: readonly unknown[]): string {
  const json = printable(JSON.stringify(list.slice(0, 40)) ?? '');
  return json.length > 40 || list.length > 40 ? `${json.slice(0, 40)}...` : json;
}

/**
 * The configuration document at `--config` (or ASSET_WEBHOOKS_CONFIG) and one
 * of its webhooks, for the commands that act on a webhook as configured
 * (`explain`, `backfill`); an id the document lacks is a user error naming
 * the ids it has.
 */
export async function loadConfiguredWebhook(
  configOption: string | undefined,
  webhookId: string,
): Promise<{ config: Config; webhook: WebhookConfig }> {
  const config = await loadConfigFile(configFromEnvOrOption(configOption));
  const webhook = config.assetUpdater.webhooks.find((candidate) => candidate.id === webhookId);
  if (!webhook) {
    throw new UserError(
      'unknown_webhook',
      `--webhook: expected one of ${config.assetUpdater.webhooks.map((w) => w.id).join(', ') || '(no webhooks configured)'}, got ${quotedPrefix(webhookId)}`,
    );
  }
  return { config, webhook };
}
