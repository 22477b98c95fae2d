import { z } from 'zod';
import { network } from './schema/network.js';
import { intRange } from './schema/primitives.js';
import { retry } from './schema/retry.js';
import { refuseUnreadableSecretFileNames, secrets } from './schema/secrets.js';
import { defaultWebhookId, uniqueIds, webhook } from './schema/webhook.js';

/**
 * The configuration document (docs/configuration.md): this one zod schema is the
 * single source of truth for its types, defaults and messages. Every object is
 * strict: an unknown key (a typo such as `eventType`) is an error, never
 * silently ignored. Messages say what was expected; the loader adds the path
 * and what was found. No environment is read here.
 *
 * This file is the document's root and the one module the rest of the code
 * imports; each part of the document has its file under ./schema/. Every
 * default is written once, in the `.default(...)` of its key: a section left
 * out is parsed from `{}` (`prefault`), so its keys take those same defaults.
 */

const settings = z
  .strictObject({
    /** How often events are coalesced and sent, in seconds. */
    intervalSeconds: intRange(1, 3600).default(60),
    /** Body size cap; the default is the specification's limit. */
    maxPayloadBytes: intRange(1024, 16_777_216).default(16_777_216),
    /** The whole budget of one request, in seconds. */
    requestTimeoutSeconds: intRange(1, 300).default(30),
    /**
     * Delivery requests one `run` process keeps in flight at once, over all
     * webhooks. Each webhook's `concurrency` bounds its own share. Standby
     * payloads (claimed ahead, see src/delivery/claimer.ts) count against it
     * too, so it bounds the bodies a process holds.
     */
    maxRequestsInFlight: intRange(1, 10_000).default(256),
    /** How long events, outcomes and payloads are kept, in days. */
    retentionDays: intRange(1, 365).default(14),
    retry: retry.prefault(() => ({})),
    network: network.prefault(() => ({})),
    secrets: secrets.prefault(() => ({})),
    webhooks: z
      .array(webhook, { error: 'expected a list of webhooks' })
      // Runs even when other entries (or other keys) are invalid, so that a
      // duplicate id is reported together with every other problem.
      .superRefine(uniqueIds, { when: (payload) => Array.isArray(payload.value) }),
  })
  // Runs even when other keys are invalid (see uniqueIds).
  .superRefine(refuseUnreadableSecretFileNames, {
    when: (payload) => payload.value !== null && typeof payload.value === 'object',
  })
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

export const configSchema = z.strictObject({ assetUpdater: settings });

export type Config = z.output<typeof configSchema>;
export type WebhookConfig = Config['assetUpdater']['webhooks'][number];
export type FilterGroup = WebhookConfig['filters'][number];
/** Where `apikey` and `signing.secret` names are resolved (docs/configuration.md, secrets providers). */
export type SecretsConfig = Config['assetUpdater']['secrets'];

export { CONDITIONS, FILTER_KINDS, type Condition, type FilterKind } from './schema/filters.js';
export { MAX_DOCUMENT_BYTES, MAX_HEADER_BYTES, MAX_HEADERS_BYTES, MAX_URL_LENGTH } from './schema/limits.js';
export { Found } from './schema/primitives.js';
export { DEFAULT_RETRY_DELAYS_SECONDS } from './schema/retry.js';
export { SECRET_PROVIDERS } from './schema/secrets.js';
export { maskedUrl, redactedUrl } from './schema/urls.js';
export { defaultWebhookId } from './schema/webhook.js';
