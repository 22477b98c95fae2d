import { LineCounter, parseDocument } from 'yaml';
import { describeError } from '../db/connect.js';
import { UserError } from '../errors.js';
import { readRegularFile, UnreadableFileError } from '../files/read-regular-file.js';
import { quotedPrefix } from '../text/printable.js';
import { secretLikeness } from '../text/secret-like.js';
import { assertOrdinaryShape } from './document-limits.js';
import {
  duplicateKeyProblems,
  MAX_PROBLEM_LINES,
  firstProblems,
  formatIssues,
  formatPath,
  issueOffset,
  lineOfParseError,
  nullKeyProblems,
} from './problems.js';
import { configSchema, MAX_DOCUMENT_BYTES, type Config, type WebhookConfig } from './schema.js';

/**
 * Parses and validates a configuration document (YAML or JSON). Throws a
 * UserError('config_invalid') listing every problem, one line each:
 * `<path>: <what was expected>, got <what was found>`.
 *
 * What a message quotes of the text: nothing when the text looks like a
 * secret (secretLikeness) or is not a mapping at all (a file given as the
 * document by mistake); else at most QUOTED_PREFIX_LENGTH escaped characters
 * of a value (quotedPrefix).
 */
export function parseConfigText(text: string, sourceName: string): Config {
  // Before parsing: what a document costs to parse grows with its size, and no sensible one comes near.
  const size = Buffer.byteLength(text, 'utf8');
  if (size > MAX_DOCUMENT_BYTES) throw documentTooLarge(sourceName, size);
  // Before parsing too: a key file given as the document must not be quoted by any message below.
  const secret = secretLikeness(text);
  if (secret !== undefined) {
    throw new UserError(
      'config_invalid',
      `${sourceName}: expected a configuration document (YAML or JSON with the root key "assetUpdater"), got what looks like a secret, ${secret}; nothing of it is shown`,
    );
  }
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
