import { createHash } from 'node:crypto';
import { z } from 'zod';
import { EVENT_TYPES, type EventType } from '../interfaces.js';
import { SIGNATURE_HEADERS } from '../delivery/http/signing.js';
import { isSecretFileName, SECRET_FILE_NAME_EXPECTED } from '../secrets/file-provider.js';
import { quotedPrefix } from '../text/printable.js';

/**
 * The configuration document (docs/configuration.md): this one zod schema is the
 * single source of truth for its types, defaults and messages. Every object is
 * strict: an unknown key (a typo such as `eventType`) is an error, never
 * silently ignored. Messages say what was expected; the loader adds the path
 * and what was found. No environment is read here.
 */

const intRange = (min: number, max: number) =>
  z
    .number({ error: `expected an integer from ${min} to ${max}` })
    .int({ error: `expected an integer from ${min} to ${max}` })
    .min(min, { error: `expected an integer from ${min} to ${max}` })
    .max(max, { error: `expected an integer from ${min} to ${max}` });

/** The spec's retry schedule: five retries, 1 to 8 minutes apart. */
export const DEFAULT_RETRY_DELAYS_SECONDS: readonly number[] = [60, 120, 240, 480, 480];

/**
 * A NUL character, or half of a UTF-16 surrogate pair without its other half.
 * Every string of the document reaches PostgreSQL (as text, or in jsonb, where
 * JSON escapes them as \u0000 and \ud800): text cannot hold NUL, and jsonb
 * refuses both, so a document holding one would fail every coalescing run.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Refuses a string holding a character PostgreSQL cannot store (see UNSTORABLE). */
function refuseUnstorable(value: string, context: z.core.$RefinementCtx<string>): void {
  const found = UNSTORABLE.exec(value);
  if (!found) return;
  context.addIssue({
    code: 'custom',
    input: new Found(
      `${found[0] === '\u0000' ? 'a NUL character' : 'an unpaired surrogate'} at position ${found.index + 1} of ${quotedPrefix(value)}`,
    ),
    message: 'expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store',
  });
}

/** A string of the document that PostgreSQL can store: every free-text value of the schema is one. */
const storableString = (error: string) => z.string({ error }).superRefine(refuseUnstorable);

const nonEmptyString = storableString('expected a non-empty string').min(1, { error: 'expected a non-empty string' });

/** Payload names of the event types by their lower-case configuration names (Created → CREATED). */
const EVENT_TYPE_BY_NAME = new Map<string, EventType>(EVENT_TYPES.map((type) => [type.toLowerCase(), type]));
const EVENT_TYPE_NAMES = 'Created, Edited, Deleted, Purged, Reversion';

const eventTypeName = z
  .string({ error: `expected one of ${EVENT_TYPE_NAMES}` })
  .refine((value) => EVENT_TYPE_BY_NAME.has(value.toLowerCase()), {
    error: `expected one of ${EVENT_TYPE_NAMES} (any case)`,
  })
  .transform((value) => EVENT_TYPE_BY_NAME.get(value.toLowerCase())!);

/**
 * Sizes no sensible document reaches. Past them a document is refused with a
 * line naming the limit, rather than accepted and failing at every delivery
 * (a receiver answers 414 or 431) or costing seconds and gigabytes to parse.
 */
/** Characters of one url (a webhook's, or an endpoint's). */
export const MAX_URL_LENGTH = 8192;
/** Bytes of one configured header, name and value (ISO-8859-1: one byte a character). */
export const MAX_HEADER_BYTES = 8192;
/** Bytes of all configured headers of one webhook, names and values. */
export const MAX_HEADERS_BYTES = 16_384;
/** Bytes of the whole document, checked before it is parsed. */
export const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;

/**
 * What a problem line says was found, when the value itself must not be
 * printed (it may be a secret) or is too long to be useful.
 */
export class Found {
  constructor(readonly description: string) {}
}

/**
 * A character that WHATWG URL parsing drops or rewrites rather than refuses:
 * tab, CR and LF anywhere, C0 controls and space at the ends, backslash (read
 * as a slash); spaces and other controls inside are percent-encoded silently.
 * A url holding one means something else than what was sent.
 */
const URL_REWRITTEN_CHARACTER = /[\x00-\x20\x7f\\]/;

const httpUrl = z.string({ error: 'expected an http or https URL' }).superRefine((value, context) => {
  if (value.length > MAX_URL_LENGTH) {
    context.addIssue({
      code: 'custom',
      input: new Found(`a url of ${value.length} characters`),
      message: `expected a url of at most ${MAX_URL_LENGTH} characters`,
    });
    return;
  }
  const rewritten = URL_REWRITTEN_CHARACTER.exec(value);
  if (rewritten) {
    context.addIssue({
      code: 'custom',
      input: new Found(
        `${quotedPrefix(rewritten[0])} at position ${rewritten.index + 1} of ${quotedPrefix(maskedUrl(value))}`,
      ),
      message:
        'expected a url without spaces, control characters (CR, LF, tab) or backslashes, which URL parsing would drop or rewrite (percent-encode them: %20, %0D, %0A, %09, %5C)',
    });
    return;
  }
  if (UNSTORABLE.test(value)) {
    refuseUnstorable(value, context);
    return;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    context.addIssue({ code: 'custom', input: value, message: 'expected an http or https URL' });
    return;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    context.addIssue({ code: 'custom', input: value, message: 'expected an http or https URL' });
  } else if (url.username !== '' || url.password !== '') {
    context.addIssue({
      code: 'custom',
      input: maskedUrl(value),
      message:
        "expected a url without user or password, which are never sent (set an Authorization header in the webhook's headers instead)",
    });
  }
});

/**
 * network.proxy: http://host:port of an HTTP CONNECT proxy. Credentials are
 * refused here, where the document would hold them in clear: a proxy that
 * needs them is given as HTTPS_PROXY from a secret instead.
 */
const proxyUrl = z.string({ error: 'expected an http:// URL of a proxy' }).superRefine((value, context) => {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url === undefined || url.protocol !== 'http:' || url.hostname === '' || URL_REWRITTEN_CHARACTER.test(value)) {
    context.addIssue({
      code: 'custom',
      input: maskedUrl(value).slice(0, 80),
      message: 'expected an http:// URL of a proxy, such as http://proxy.internal:3128',
    });
  } else if (url.username !== '' || url.password !== '') {
    context.addIssue({
      code: 'custom',
      input: maskedUrl(value),
      message:
        'expected a proxy url without user or password (leave network.proxy unset and give HTTPS_PROXY from a secret instead)',
    });
  } else if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    context.addIssue({
      code: 'custom',
      input: maskedUrl(value).slice(0, 80),
      message: 'expected a proxy url of a scheme, host and port only',
    });
  }
});

/** RFC 9110 token characters. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** RFC 9110 field-value characters: visible ASCII, space, tab and obs-text (0x80-0xFF); no CR, LF, NUL or other controls. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Headers the service sets itself; configuration may not override them. */
const SERVICE_HEADERS = ['content-type', 'x-api-key', 'host', 'content-length'];
/**
 * The Standard Webhooks headers, set by signing. Refused even on a webhook
 * without signing: a receiver that verifies them would reject such requests,
 * and a webhook that turns signing on later would send them twice.
 */
const SIGNATURE_HEADER_NAMES: readonly string[] = SIGNATURE_HEADERS;
/** Headers of the connection and the message framing, which the HTTP client manages (undici refuses them). */
const CONNECTION_HEADERS = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect'];

/**
 * Values are checked here rather than by the record's value type, so that
 * every problem of the mapping is reported at once, not only the wrong types.
 */
const headers = z
  .record(z.string(), z.unknown(), {
    error: 'expected a mapping of header names to string values',
  })
  .superRefine((value, context) => {
    const seen = new Map<string, string>();
    let total = 0;
    for (const [name, headerValue] of Object.entries(value)) {
      const lower = name.toLowerCase();
      if (!HEADER_NAME.test(name)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message: 'expected a header name made of HTTP token characters',
        });
      } else if (SERVICE_HEADERS.includes(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message:
            'expected a header other than Content-Type, X-API-Key, Host or Content-Length (the service sets those)',
        });
      } else if (SIGNATURE_HEADER_NAMES.includes(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message:
            'expected a header other than webhook-id, webhook-timestamp or webhook-signature (signing sets those: see signing.secret)',
        });
      } else if (CONNECTION_HEADERS.includes(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message:
            'expected a header other than Connection, Keep-Alive, Transfer-Encoding, Upgrade or Expect (the HTTP client manages those)',
        });
      } else if (seen.has(lower)) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: name,
          message: `expected each header once (header names ignore case: ${quotedPrefix(seen.get(lower)!)} is the same header)`,
        });
      }
      if (!seen.has(lower)) seen.set(lower, name);
      total += name.length + (typeof headerValue === 'string' ? headerValue.length : 0);
      if (typeof headerValue !== 'string') {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: headerValue,
          message: 'expected a string header value',
        });
      } else if (name.length + headerValue.length > MAX_HEADER_BYTES) {
        context.addIssue({
          code: 'custom',
          path: [name],
          input: new Found(`${name.length + headerValue.length} bytes (the value is not shown: it may be secret)`),
          message: `expected a header of at most ${MAX_HEADER_BYTES} bytes, name and value`,
        });
      } else if (!HEADER_VALUE.test(headerValue)) {
        const index = [...headerValue].findIndex((character) => !HEADER_VALUE.test(character));
        context.addIssue({
          code: 'custom',
          path: [name],
          input: new Found(
            `a value with ${quotedPrefix([...headerValue][index]!)} at position ${index + 1} (the value is not shown: it may be secret)`,
          ),
          message:
            'expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF',
        });
      }
    }
    if (total > MAX_HEADERS_BYTES) {
      context.addIssue({
        code: 'custom',
        input: new Found(`${total} bytes in ${seen.size} headers`),
        message: `expected at most ${MAX_HEADERS_BYTES} bytes of headers in all, names and values`,
      });
    }
  })
  .transform((value) => value as Record<string, string>);

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

const filterGroup = z
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

export const SECRET_PROVIDERS = ['env', 'file', 'gcp', 'aws'] as const;

const secrets = z
  .strictObject({
    /** Where `apikey` names are resolved. Default env. */
    provider: z.enum(SECRET_PROVIDERS, { error: `expected one of ${SECRET_PROVIDERS.join(', ')}` }).default('env'),
    /** How long a resolved value is reused. Default 300 seconds. */
    cacheSeconds: intRange(0, 86_400).default(300),
    /** provider file: the directory holding one file per secret. */
    directory: nonEmptyString.optional(),
    /** provider gcp: the project of secret ids; apiEndpoint for a private endpoint. */
    gcp: z.strictObject({ projectId: nonEmptyString, apiEndpoint: nonEmptyString.optional() }).optional(),
    /** provider aws: the region; endpoint to override the service URL. */
    aws: z.strictObject({ region: nonEmptyString, endpoint: httpUrl.optional() }).optional(),
  })
  .superRefine((value, context) => {
    if (value.provider === 'file' && value.directory === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['directory'],
        input: undefined,
        message: 'expected a directory for secrets provider file',
      });
    }
    if (value.provider === 'gcp' && value.gcp === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['gcp', 'projectId'],
        input: undefined,
        message: 'expected a projectId for secrets provider gcp',
      });
    }
    if (value.provider === 'aws' && value.aws === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['aws', 'region'],
        input: undefined,
        message: 'expected a region for secrets provider aws',
      });
    }
  });

const webhook = z.strictObject({
  /** Unique, [A-Za-z0-9_.-]{1,64}. Default: `webhook-` + the first 12 hex digits of sha256(url). */
  id: z
    .string({ error: 'expected an id of 1 to 64 characters A-Z a-z 0-9 _ . -' })
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: 'expected an id of 1 to 64 characters A-Z a-z 0-9 _ . -' })
    .optional(),
  url: httpUrl,
  enabled: z.boolean({ error: 'expected true or false' }),
  /**
   * A pause for a receiver's maintenance window: events are still coalesced
   * into payloads, which wait in order without expiring (the time paused does
   * not count towards retry.deadLetterAfterSeconds) and are sent once `paused`
   * is false again. With `enabled: false` the webhook is disabled: it receives
   * nothing and its waiting payloads expire. Default false.
   */
  paused: z.boolean({ error: 'expected true or false' }).default(false),
  /** The name of a secret-manager entry (never the secret itself). */
  apikey: nonEmptyString.optional(),
  headers: headers.optional(),
  /**
   * Standard Webhooks signing. `secret` is the name of a secret-manager entry
   * (resolved like `apikey`, never the secret itself) whose value is one or
   * more `whsec_` keys separated by spaces; each key signs. Default: unsigned.
   */
  signing: z.strictObject({ secret: nonEmptyString }, { error: 'expected a mapping with the key secret' }).optional(),
  /** Supertypes to deliver. Default: only Resource. */
  resourceTypes: z
    .array(nonEmptyString, { error: 'expected a list of supertypes' })
    .min(1, { error: 'expected at least one resource type' })
    .default(() => ['Resource']),
  /** Event types to deliver, any case, normalized to the payload form (Created → CREATED). Default: all. */
  eventTypes: z
    .array(eventTypeName, { error: `expected a list of ${EVENT_TYPE_NAMES}` })
    .min(1, { error: 'expected at least one event type' })
    .default(() => [...EVENT_TYPES]),
  /** Events per payload, 1..100. Default 100. */
  batchSize: intRange(1, 100).default(100),
  /** Payloads in flight, 1..64; 1 means strictly in order. Default 1. */
  concurrency: intRange(1, 64).default(1),
  /** Filter groups, all of which must pass. Default: none. */
  filters: z.array(filterGroup, { error: 'expected a list of filter groups' }).default(() => []),
});

const settings = z
  .strictObject({
    /** How often events are coalesced and sent, 1..3600 seconds. Default 60. */
    intervalSeconds: intRange(1, 3600).default(60),
    /** Body size cap, 1024..16777216 bytes. Default 16 MiB, the specification's limit. */
    maxPayloadBytes: intRange(1024, 16_777_216).default(16_777_216),
    /** Per request, 1..300 seconds. Default 30. */
    requestTimeoutSeconds: intRange(1, 300).default(30),
    /**
     * Delivery requests one `run` process keeps in flight at once, over all
     * webhooks, 1..10000. Default 256. Each webhook's `concurrency` bounds
     * its own share. Standby payloads (claimed ahead, see DeliveryPump) count
     * against it too, so it bounds the bodies a process holds.
     */
    maxRequestsInFlight: intRange(1, 10_000).default(256),
    /** How long events, outcomes and payloads are kept, 1..365 days. Default 14. */
    retentionDays: intRange(1, 365).default(14),
    retry: z
      .strictObject({
        /**
         * One entry per retry, 0 to 10 entries of 1..86400 seconds; an empty list
         * means no retry. Default 60, 120, 240, 480, 480 (five retries).
         */
        delaysSeconds: z
          .array(intRange(1, 86_400), { error: 'expected a list of delays in seconds' })
          .max(10, { error: 'expected at most 10 retries' })
          .default(() => [...DEFAULT_RETRY_DELAYS_SECONDS]),
        /** From payload creation. Default 86400 (24 hours). */
        deadLetterAfterSeconds: intRange(1, 30 * 86_400).default(86_400),
        /**
         * 4xx status codes retried like a 5xx instead of dead-lettered as
         * rejected (receivers that throttle: 408, 429), each 400..499. Default
         * none: every 4xx is rejected. Says nothing of Retry-After.
         */
        retryStatusCodes: z
          .array(intRange(400, 499), { error: 'expected a list of status codes 400..499' })
          .default(() => []),
        /**
         * When true, a retried response's Retry-After lengthens the next delay
         * (never shortens it), for at most one hour and never past the delivery
         * window, and holds the webhook's other payloads until then. Default
         * false: every retry follows delaysSeconds, as the specification says.
         */
        honorRetryAfter: z.boolean({ error: 'expected true or false' }).default(false),
      })
      .default(() => ({
        delaysSeconds: [...DEFAULT_RETRY_DELAYS_SECONDS],
        deadLetterAfterSeconds: 86_400,
        retryStatusCodes: [],
        honorRetryAfter: false,
      })),
    network: z
      .strictObject({
        /** Loopback and private ranges are refused unless true. Default false. */
        allowPrivateAddresses: z.boolean({ error: 'expected true or false' }).default(false),
        /**
         * An HTTP CONNECT proxy every request to a receiver goes through. No
         * default: unset, HTTPS_PROXY/HTTP_PROXY/NO_PROXY are honoured.
         */
        proxy: proxyUrl.optional(),
      })
      .default(() => ({ allowPrivateAddresses: false })),
    secrets: secrets.default(() => ({ provider: 'env' as const, cacheSeconds: 300 })),
    webhooks: z
      .array(webhook, { error: 'expected a list of webhooks' })
      // Runs even when other entries (or other keys) are invalid, so that a
      // duplicate id is reported together with every other problem.
      .superRefine(uniqueIds, { when: (payload) => Array.isArray(payload.value) }),
  })
  // With provider file an apikey or signing.secret names a file in the
  // directory: one that could never be read is refused now rather than at
  // every delivery.
  // Runs even when other keys are invalid (see uniqueIds), so the entries are read as unknown.
  .superRefine(
    (value, context) => {
      const { secrets: given, webhooks: entries } = value as { secrets?: { provider?: unknown }; webhooks?: unknown };
      if (given?.provider !== 'file' || !Array.isArray(entries)) return;
      entries.forEach((entry: unknown, index) => {
        if (entry === null || typeof entry !== 'object') return;
        const { apikey, signing } = entry as { apikey?: unknown; signing?: unknown };
        const signingSecret =
          signing !== null && typeof signing === 'object' ? (signing as { secret?: unknown }).secret : undefined;
        const names: Array<[unknown, (string | number)[]]> = [
          [apikey, ['apikey']],
          [signingSecret, ['signing', 'secret']],
        ];
        for (const [name, path] of names) {
          if (typeof name === 'string' && name !== '' && !isSecretFileName(name)) {
            context.addIssue({
              code: 'custom',
              path: ['webhooks', index, ...path],
              input: name,
              message: `${SECRET_FILE_NAME_EXPECTED} (secrets provider file)`,
            });
          }
        }
      });
    },
    { when: (payload) => payload.value !== null && typeof payload.value === 'object' },
  )
  // After the duplicate check, which must still see whether an id was given.
  .transform((value) => ({
    ...value,
    // idFromUrl: the id changes with the url (see configWarnings).
    webhooks: value.webhooks.map((entry) => ({
      ...entry,
      id: entry.id ?? defaultWebhookId(entry.url),
      idFromUrl: entry.id === undefined,
    })),
  }));

/**
 * Two webhooks may not share an id, given or derived from the url. The
 * entries may be only partly valid here (see `when` above): read them as
 * unknown and skip what cannot have an id yet.
 */
function uniqueIds(entries: readonly unknown[], context: z.core.$RefinementCtx<unknown>): void {
  const seen = new Map<string, number>();
  entries.forEach((entry, index) => {
    if (entry === null || typeof entry !== 'object') return;
    const { id, url } = entry as { id?: unknown; url?: unknown };
    const effective =
      typeof id === 'string' ? id : id === undefined && typeof url === 'string' ? defaultWebhookId(url) : undefined;
    if (effective === undefined) return;
    const first = seen.get(effective);
    if (first === undefined) {
      seen.set(effective, index);
      return;
    }
    const derived = typeof id === 'string' ? '' : '; this one is derived from the url, set an id';
    context.addIssue({
      code: 'custom',
      path: [index, 'id'],
      input: effective,
      message: `expected a unique webhook id (webhooks[${first}] has the same${derived})`,
    });
  });
}

export const configSchema = z.strictObject({ assetUpdater: settings });

export type Config = z.output<typeof configSchema>;
export type WebhookConfig = Config['assetUpdater']['webhooks'][number];
export type FilterGroup = WebhookConfig['filters'][number];
/** Where `apikey` and `signing.secret` names are resolved (docs/configuration.md, secrets providers). */
export type SecretsConfig = Config['assetUpdater']['secrets'];

/** `webhook-` + the first 12 hex digits of the SHA-256 of the url: the id of a webhook that sets none. */
export function defaultWebhookId(url: string): string {
  return `webhook-${createHash('sha256').update(url).digest('hex').slice(0, 12)}`;
}

/** The url without user or password, for logs and the webhooks table. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return '<invalid url>';
  }
}

/**
 * The url as written, with any password of its user:password@ replaced by
 * ***: for a problem line that must show the url, not its secret. (The last @
 * before the path ends the user information, as URL parsing reads it.)
 */
export function maskedUrl(url: string): string {
  return url.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#@:]*:)[^/?#]*@/, '$1***@');
}
